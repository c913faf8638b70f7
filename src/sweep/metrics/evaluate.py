"""The verb users call: ``evaluate(run, labels, metrics)`` and the Scores it returns."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sweep.errors import ConfigError
from sweep.labels import Labels
from sweep.metrics.gains import RankedGains, ranked_gains, sparse_gains
from sweep.metrics.ranking import KERNELS, NEED_JUDGED, NEEDS_K, NO_K

METRIC_PATTERN = re.compile(r"^(?P<name>[a-z_]+?)(?:@(?P<k>\d+))?$")
DEFAULT_KS = (1, 3, 5, 10, 20, 100)


@dataclass(frozen=True)
class Metric:
    family: str
    k: int | None

    @property
    def name(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"


def parse_metric(name: str, *, key: str = "metric") -> Metric:
    m = METRIC_PATTERN.match(name.strip().lower())
    family = m.group("name") if m else None
    if family not in KERNELS:
        raise ConfigError(
            "",
            key,
            f"unknown metric {name!r}",
            ["known: " + ", ".join(f"{f}@k" if f in NEEDS_K else f for f in KERNELS)],
        )
    k = int(m.group("k")) if m.group("k") else None
    if family in NEEDS_K and k is None:
        raise ConfigError("", key, f"metric {name!r} needs a cutoff", [f"for example {family}@10"])
    if family in NO_K and k is not None:
        raise ConfigError("", key, f"metric {family!r} takes no cutoff")
    if k is not None and k < 1:
        raise ConfigError("", key, f"cutoff must be >= 1 in {name!r}")
    return Metric(family, k)


def standard_metrics(ks: tuple[int, ...] = DEFAULT_KS) -> list[str]:
    names = []
    for k in ks:
        names += [f"recall@{k}", f"precision@{k}", f"hit_rate@{k}", f"ndcg@{k}", f"mrr@{k}", f"map@{k}"]
        names.append(f"judged@{k}")  # how much of the top k was judged at all: low means a lower bound
    return names + ["mrr", "map", "r_precision", "bpref"]


@dataclass
class Scores:
    """Per-question values of each metric; means leave out nothing but ``skipped``."""

    question_ids: list[str]
    values: dict[str, np.ndarray]
    skipped: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # question text by id, where known (for comparisons)

    def mean(self) -> dict[str, float]:
        return {name: float(v.mean()) if len(v) else 0.0 for name, v in self.values.items()}

    def per_question(self) -> dict[str, dict[str, float]]:
        names = list(self.values)
        table = (
            np.column_stack([self.values[n] for n in names])
            if names
            else np.zeros((len(self.question_ids), 0))
        )
        return {qid: dict(zip(names, map(float, row))) for qid, row in zip(self.question_ids, table)}

    def to_json(self) -> dict:
        out = {"mean": self.mean(), "per_question": self.per_question(), "skipped": list(self.skipped)}
        if self.texts:
            out["questions"] = {qid: self.texts[qid] for qid in self.question_ids if qid in self.texts}
        return out

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1, sort_keys=False))


def evaluate(run: np.ndarray, labels: Labels, metrics: list[str] | None = None) -> Scores:
    """Score a run (``(questions, depth)`` chunk indices, ``-1`` padded) against labels."""
    parsed = [parse_metric(m) for m in (metrics or standard_metrics())]
    gains = ranked_gains(run, labels, ideal_depth=_ideal_depth(parsed), judged=_needs_judged(parsed))
    return _scores(gains, labels, parsed)


def evaluate_entries(
    labels: Labels,
    rows: np.ndarray,
    ranks: np.ndarray,
    chunks: np.ndarray,
    depth: int,
    metrics: list[str] | None = None,
) -> Scores:
    """Score retrieved entries given sparsely (question row, 0-based rank, chunk), without a run matrix.

    Only the entries of labelled chunks matter; a caller that knows where they rank (``sweep.score``
    does) passes just those. The values equal :func:`evaluate` on the full matrix.

    Args:
        labels: the labels the rows follow.
        rows, ranks, chunks: parallel int arrays.
        depth: the longest ranking's length.
        metrics: measure names; default: the standard set.

    Returns:
        :class:`Scores`.

    Example:
        >>> evaluate_entries(labels, np.array([0]), np.array([0]), np.array([3]), depth=10)  # doctest: +SKIP
    """
    parsed = [parse_metric(m) for m in (metrics or standard_metrics())]
    gains = sparse_gains(
        labels, rows, ranks, chunks, max(depth, 1), _ideal_depth(parsed), judged=_needs_judged(parsed)
    )
    return _scores(gains, labels, parsed)


def _needs_judged(parsed: list[Metric]) -> bool:
    return any(m.family in NEED_JUDGED for m in parsed)


def _ideal_depth(parsed: list[Metric]) -> int:
    return max([1] + [m.k for m in parsed if m.family.startswith("ndcg") and m.k is not None])


def _scores(gains: RankedGains, labels: Labels, parsed: list[Metric]) -> Scores:
    values = {m.name: KERNELS[m.family](gains, m.k) for m in parsed}
    return Scores(list(labels.question_ids), values, list(labels.skipped))
