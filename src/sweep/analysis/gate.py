"""Is the candidate not worse than the baseline? A non-inferiority decision over per-question values.

A gate in CI must not ask "is the candidate significantly worse?": on a small eval set nothing is
significant, and every regression would pass. It asks the opposite, as a non-inferiority trial does:
the candidate passes a metric only when the data show its mean is above ``baseline - max_drop``
(one-sided, at ``alpha``). Several gated metrics must each pass (an intersection-union test, so no
multiplicity correction is due).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sweep.analysis.compare import Comparison, compare_scores, paired_values
from sweep.analysis.significance import bootstrap_ci, non_inferiority
from sweep.errors import SweepError
from sweep.metrics import Scores


@dataclass(frozen=True)
class GateCheck:
    """One gated metric: the means, the drop allowed, and the one-sided test's outcome."""

    metric: str
    baseline: float
    candidate: float
    delta: float  # candidate - baseline
    lower_bound: float  # one-sided (1 - alpha) bootstrap bound of the mean delta
    max_drop: float
    alpha: float
    p_value: float  # randomisation test of H0: delta <= -max_drop; it decides
    p_t_test: float

    @property
    def passed(self) -> bool:
        return self.p_value < self.alpha

    def to_json(self) -> dict:
        return {**self.__dict__, "passed": self.passed}


@dataclass
class GateResult:
    """What ``sweep gate`` decided, with the comparison behind it."""

    baseline_name: str
    candidate_name: str
    eval_set: str
    checks: list[GateCheck]
    comparison: Comparison  # candidate (B) against baseline (A) on every shared metric
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_json(self) -> dict:
        return {
            "passed": self.passed,
            "baseline": self.baseline_name,
            "candidate": self.candidate_name,
            "eval_set": self.eval_set,
            "checks": [c.to_json() for c in self.checks],
            "comparison": self.comparison.to_json(),
            "warnings": self.warnings,
        }


def judge(
    baseline: Scores,
    candidate: Scores,
    metrics: list[str],
    *,
    max_drop: float = 0.01,
    alpha: float = 0.05,
    baseline_name: str = "baseline",
    candidate_name: str = "candidate",
    eval_set: str = "",
    seed: int = 0,
) -> GateResult:
    """Decide, metric by metric, whether the candidate is not worse than the baseline by ``max_drop``.

    Args:
        baseline, candidate: per-question values on the same eval set (questions paired by id).
        metrics: the gated metrics, e.g. ``["ndcg@10"]``; each must pass.
        max_drop: the non-inferiority margin, in the metric's units (0 asks for an improvement).
        alpha: the one-sided level.
        baseline_name, candidate_name, eval_set: how the summary names them.
        seed: of the randomisation test and the bootstrap.

    Returns:
        :class:`GateResult`; ``.passed`` is the verdict.

    Raises:
        SweepError: a gated metric is not scored on both sides, or the margin or level is out of range.

    Example:
        >>> result = judge(prod.scores, new.scores, ["ndcg@10"], max_drop=0.01)
        >>> result.passed
        True
    """
    if not max_drop >= 0:
        raise SweepError(f"--max-drop must be >= 0 (got {max_drop})")
    if not 0 < alpha < 0.5:
        raise SweepError(f"--alpha must be between 0 and 0.5 (got {alpha})")
    ids, pairs = paired_values(baseline, candidate, baseline_name, candidate_name)
    missing = [m for m in metrics if m not in pairs]
    if missing:
        raise SweepError(
            f"--metric {missing[0]}: not scored on both sides (they share: {', '.join(pairs)}); "
            "add its cutoff to evaluation.ks"
        )
    checks = []
    for name in metrics:
        a, b = pairs[name]
        p_rand, p_t = non_inferiority(a, b, max_drop, seed=seed)
        low = bootstrap_ci(b - a, confidence=1 - 2 * alpha, seed=seed)[0]
        checks.append(
            GateCheck(
                name,
                float(a.mean()),
                float(b.mean()),
                float((b - a).mean()),
                low,
                max_drop,
                alpha,
                p_rand,
                p_t,
            )
        )
    comparison = compare_scores(
        baseline, candidate, a_name=baseline_name, b_name=candidate_name, metric=metrics[0], seed=seed
    )
    warnings = []
    if 0.5 ** len(ids) >= alpha:
        warnings.append(
            f"only {len(ids)} questions: no candidate can pass at alpha {alpha} (the smallest p-value "
            f"a sign-flip test reaches is {0.5 ** len(ids):.3g}); label more questions"
        )
    if comparison.only_in_one:
        warnings.append(
            f"{len(comparison.only_in_one)} question(s) scored on one side only were left out "
            f"(e.g. {comparison.only_in_one[0]}): were both run on the same eval set?"
        )
    return GateResult(baseline_name, candidate_name, eval_set, checks, comparison, warnings)


__all__ = ["GateCheck", "GateResult", "judge"]
