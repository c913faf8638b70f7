"""Two configurations, question by question: what changed, how sure we are, and where.

``A`` and ``B`` are result files (``eval --json``, ``score --json``) or MLflow
run ids of trials (their ``scores.json`` artifact). Deltas are B − A over
the questions both scored, with a bootstrap interval, the randomisation and
t-test p-values and Holm's correction over the metrics compared.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sweep.analysis.significance import PairedComparison, compare_many
from sweep.errors import SweepError
from sweep.metrics import Scores

RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class QuestionChange:
    question_id: str
    text: str
    a: float
    b: float
    rank_a: int | None  # rank of the first relevant result; None when none was retrieved
    rank_b: int | None

    def to_json(self) -> dict:
        return self.__dict__.copy()


@dataclass
class Comparison:
    a_name: str
    b_name: str
    metric: str  # the one that decides improved / regressed
    metrics: dict[str, PairedComparison]
    improved: list[QuestionChange]
    regressed: list[QuestionChange]
    n_questions: int
    only_in_one: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "a": self.a_name,
            "b": self.b_name,
            "metric": self.metric,
            "n_questions": self.n_questions,
            "metrics": {n: c.to_json() for n, c in self.metrics.items()},
            "improved": [q.question_id for q in self.improved],
            "regressed": [q.question_id for q in self.regressed],
            "changes": {
                "improved": [q.to_json() for q in self.improved],
                "regressed": [q.to_json() for q in self.regressed],
            },
            "only_in_one": self.only_in_one,
        }


def read_scores(path: str | Path) -> Scores:
    """A result file written by ``eval --json`` or ``score --json``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        table = data["per_question"]
        ids = list(table)
        names = list(next(iter(table.values()), {}))
        values = {n: np.array([float(table[q][n]) for q in ids]) for n in names}
    except FileNotFoundError:
        raise SweepError(
            f"{path}: no such result file (write one with `sweep eval CONFIG --json {path.name}`)"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SweepError(f"{path}: not a JSON result file ({e})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise SweepError(
            f"{path}: per_question: not a result file, expected {{qid: {{metric: value}}}} ({e!r})"
        ) from None
    return Scores(ids, values, list(data.get("skipped", [])), dict(data.get("questions", {})))


def load_side(ref: str, tracking_uri: str) -> tuple[Scores, str]:
    """A result file, or an MLflow run id whose ``scores.json`` artifact is fetched."""
    if Path(ref).exists() or not RUN_ID.match(ref):
        return read_scores(ref), Path(ref).name
    import mlflow

    client = mlflow.MlflowClient(tracking_uri)
    try:
        run = client.get_run(ref)
        local = mlflow.artifacts.download_artifacts(
            run_id=ref, artifact_path="scores.json", tracking_uri=tracking_uri
        )
    except Exception as e:  # MLflow raises several types for "not there"
        raise SweepError(
            f"run {ref}: cannot read its scores.json from {tracking_uri} ({str(e).splitlines()[0]})"
            " — pass --tracking-uri, or a result file"
        ) from None
    return read_scores(local), run.data.tags.get("mlflow.runName", ref)


def first_relevant_rank(scores: Scores, i: int) -> int | None:
    """From the reciprocal rank: 1/rank, 0 when nothing relevant was retrieved."""
    names = ["mrr"] + sorted((n for n in scores.values if n.startswith("mrr@")), key=lambda n: -int(n[4:]))
    for n in names:
        if n in scores.values:
            rr = scores.values[n][i]
            return int(round(1 / rr)) if rr > 0 else None
    return None


def pick_metric(names: list[str], wanted: str | None) -> str:
    if wanted:
        if wanted not in names:
            raise SweepError(f"metric {wanted!r} is not in both results (they share: {', '.join(names)})")
        return wanted
    for pattern in ("ndcg@10", "ndcg@"):
        hit = next((n for n in names if n.startswith(pattern)), None)
        if hit:
            return hit
    return names[0]


def paired_values(
    a: Scores, b: Scores, a_name: str = "A", b_name: str = "B"
) -> tuple[list[str], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The questions both sides scored (in A's order) and each shared metric's two value arrays on them.

    Args:
        a, b: the two sides' :class:`Scores`.
        a_name, b_name: how errors name them.

    Returns:
        ``(question_ids, {metric: (values_a, values_b)})``.

    Raises:
        SweepError: no question or no metric in common.

    Example:
        >>> ids, pairs = paired_values(baseline.scores, tuned.scores)
        >>> pairs["ndcg@10"][1].mean() - pairs["ndcg@10"][0].mean()
    """
    in_b = set(b.question_ids)
    common_ids = [q for q in a.question_ids if q in in_b]
    if not common_ids:
        raise SweepError(f"{a_name} and {b_name} share no question ids: were they run on the same eval set?")
    ib = {q: i for i, q in enumerate(b.question_ids)}
    rows_a = np.array([i for i, q in enumerate(a.question_ids) if q in in_b])
    rows_b = np.array([ib[q] for q in common_ids])
    names = [n for n in a.values if n in b.values]
    if not names:
        raise SweepError(f"{a_name} and {b_name} have no metric in common")
    return common_ids, {n: (a.values[n][rows_a], b.values[n][rows_b]) for n in names}


def compare_scores(
    a: Scores, b: Scores, *, a_name: str = "A", b_name: str = "B", metric: str | None = None, seed: int = 0
) -> Comparison:
    """B against A on the questions both scored: per-metric paired tests and the questions that flipped.

    Args:
        a, b: the two sides' :class:`Scores` (e.g. ``evaluate_config(...).scores``, ``score(...)``).
        a_name, b_name: how the text and errors name them.
        metric: the metric that decides improved/regressed (default ndcg@10, else the first ndcg).
        seed: of the randomization test and the bootstrap.

    Returns:
        :class:`Comparison`: deltas with intervals and Holm-adjusted p-values, and the changed questions.

    Example:
        >>> c = compare_scores(baseline.scores, tuned.scores, metric="ndcg@10")
        >>> print(render_comparison(c))
    """
    common_ids, pairs = paired_values(a, b, a_name, b_name)
    only = sorted(set(a.question_ids) ^ set(b.question_ids))
    ia = {q: i for i, q in enumerate(a.question_ids)}
    ib = {q: i for i, q in enumerate(b.question_ids)}
    names = list(pairs)
    metrics = compare_many(pairs, seed=seed)
    decide = pick_metric(names, metric)
    va, vb = pairs[decide]
    texts = {**a.texts, **b.texts}
    changes = [
        QuestionChange(
            q,
            texts.get(q, ""),
            float(x),
            float(y),
            first_relevant_rank(a, ia[q]),
            first_relevant_rank(b, ib[q]),
        )
        for q, x, y in zip(common_ids, va, vb)
    ]
    improved = sorted((c for c in changes if c.b - c.a > 1e-12), key=lambda c: c.a - c.b)
    regressed = sorted((c for c in changes if c.a - c.b > 1e-12), key=lambda c: c.b - c.a)
    return Comparison(a_name, b_name, decide, metrics, improved, regressed, len(common_ids), only)


def rank_text(r: int | None) -> str:
    """A first relevant rank as printed: the number, or ``-`` when nothing relevant was retrieved."""
    return "-" if r is None else str(r)


def render_comparison(c: Comparison, limit: int = 10) -> str:
    width = max(len(n) for n in c.metrics)
    lines = [
        f"B = {c.b_name}  vs  A = {c.a_name}, {c.n_questions} questions in common"
        + (f" ({len(c.only_in_one)} in only one, left out)" if c.only_in_one else ""),
        f"{'metric':<{width}}        A        B    delta   95% CI of delta      p (rand)  p (t)  p (Holm)",
    ]
    for name, m in c.metrics.items():
        star = " *" if m.significant else ""
        lines.append(
            f"{name:<{width}} {m.a:8.4f} {m.b:8.4f} {m.delta:+8.4f}   [{m.ci[0]:+.4f}, {m.ci[1]:+.4f}]"
            f"  {m.p_value:8.4f} {m.p_t_test:6.4f} {m.p_holm:8.4f}{star}"
        )
    lines.append("* significant at 0.05 after Holm's correction, interval excluding 0")
    for title, group in (("improved", c.improved), ("regressed", c.regressed)):
        lines.append(f"\n{len(group)} question(s) {title} on {c.metric} (first relevant rank A -> B):")
        for q in group[:limit]:
            text = (q.text[:70] + "…") if len(q.text) > 70 else q.text
            lines.append(
                f"  {q.question_id:<12} {q.a:.3f} -> {q.b:.3f}  rank {rank_text(q.rank_a):>3} -> {rank_text(q.rank_b):<3} {text}"
            )
        if len(group) > limit:
            lines.append(f"  … and {len(group) - limit} more (see --json)")
    return "\n".join(lines)


__all__ = [
    "Comparison",
    "QuestionChange",
    "compare_scores",
    "load_side",
    "paired_values",
    "rank_text",
    "read_scores",
    "render_comparison",
]
