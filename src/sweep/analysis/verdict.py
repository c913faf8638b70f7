"""The final word of a sweep: best against baseline on questions no trial saw.

The tuning objective of the best trial is optimistic by construction (it is
the maximum of many noisy estimates); the headline is the held-out score,
with a bootstrap interval and a paired test against the baseline. A second
check asks whether the best trial even beat the runner-up on the tuning
questions by more than the noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sweep.analysis.compare import Comparison, compare_scores
from sweep.analysis.diagnostics import Finding, describe, diagnose
from sweep.analysis.significance import PairedComparison, bootstrap_ci, compare_paired
from sweep.pipeline.result import EvalResult


@dataclass
class Verdict:
    objective: str
    split: str  # how the questions were divided, in words
    n_questions: int
    best: dict[str, float]
    baseline: dict[str, float]
    intervals: dict[str, tuple[float, float]]  # best's metrics
    baseline_intervals: dict[str, tuple[float, float]]
    comparison: Comparison  # best (B) against baseline (A), held out
    curves: dict[str, list[float]]  # recall@k, k = 1.., held out
    findings: list[Finding]
    best_trial: int
    noise: PairedComparison | None = None  # best vs runner-up, tuning questions
    runner_up_trial: int | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "objective": self.objective,
            "split": self.split,
            "n_questions": self.n_questions,
            "best": self.best,
            "baseline": self.baseline,
            "intervals": {k: list(v) for k, v in self.intervals.items()},
            "baseline_intervals": {k: list(v) for k, v in self.baseline_intervals.items()},
            "comparison": self.comparison.to_json(),
            "curves": self.curves,
            "findings": [f.__dict__ for f in self.findings],
            "best_trial": self.best_trial,
            "noise": self.noise.to_json() if self.noise else None,
            "runner_up_trial": self.runner_up_trial,
            "warnings": self.warnings,
        }


def intervals(result: EvalResult, seed: int = 0) -> dict[str, tuple[float, float]]:
    return {name: bootstrap_ci(v, seed=seed) for name, v in result.scores.values.items()}


def noise_check(best: EvalResult, runner_up: EvalResult, objective: str) -> PairedComparison:
    return compare_paired(runner_up.scores.values[objective], best.scores.values[objective])


def build_verdict(
    best: EvalResult,
    baseline: EvalResult,
    *,
    objective: str,
    split: str,
    best_trial: int,
    noise: PairedComparison | None = None,
    runner_up_trial: int | None = None,
    best_is_baseline: bool = False,
) -> Verdict:
    comparison = compare_scores(
        baseline.scores,
        best.scores,
        a_name="baseline",
        b_name=f"best (trial {best_trial})",
        metric=objective if objective in baseline.scores.values else None,
    )
    warnings = []
    if noise is not None and not noise.significant:
        warnings.append(
            f"the best trial's margin over the runner-up (trial {runner_up_trial}) on the tuning questions is "
            f"{noise.delta:+.4f} {objective}, 95% CI [{noise.ci[0]:+.4f}, {noise.ci[1]:+.4f}], p = {noise.p_value:.3f}: "
            "inside the noise; either could be the better configuration"
        )
    head = comparison.metrics.get(objective)
    if best_is_baseline:
        warnings.append("no trial beat the baseline configuration on the tuning questions: keep the baseline")
    elif head is not None and not head.significant:
        warnings.append(
            f"on the held-out questions the best configuration is not significantly different from the "
            f"baseline on {objective} (delta {head.delta:+.4f}, p = {head.p_value:.3f})"
        )
    return Verdict(
        objective,
        split,
        len(best.scores.question_ids),
        best.scores.mean(),
        baseline.scores.mean(),
        intervals(best),
        intervals(baseline),
        comparison,
        {"best": best.recall_curve.tolist(), "baseline": baseline.recall_curve.tolist()},
        diagnose(best.recall_curve, best.scores.mean(), best.config.retrieval.top_k),
        best_trial,
        noise,
        runner_up_trial,
        warnings,
    )


def describe_verdict(v: Verdict) -> str:
    o = v.objective
    lo, hi = v.intervals[o]
    lines = [
        f"held-out ({v.split}; {v.n_questions} questions no trial saw):",
        f"  best (trial {v.best_trial})  {o} = {v.best[o]:.4f}  95% CI [{lo:.4f}, {hi:.4f}]",
    ]
    if o in v.baseline:
        blo, bhi = v.baseline_intervals[o]
        lines.append(f"  baseline          {o} = {v.baseline[o]:.4f}  95% CI [{blo:.4f}, {bhi:.4f}]")
    head = v.comparison.metrics.get(o)
    if head is not None:
        lines.append(
            f"  delta {head.delta:+.4f}  95% CI [{head.ci[0]:+.4f}, {head.ci[1]:+.4f}]  "
            f"p = {head.p_value:.4f} (randomisation), {head.p_t_test:.4f} (t-test)"
        )
        lines.append(
            f"  {len(v.comparison.improved)} question(s) improved, {len(v.comparison.regressed)} regressed"
        )
    lines += [f"warning: {w}" for w in v.warnings]
    lines.append(describe(v.findings))
    return "\n".join(lines)


__all__ = ["Verdict", "build_verdict", "describe_verdict", "noise_check"]
