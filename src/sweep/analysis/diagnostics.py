"""Reading the recall@k curve: is the problem finding the evidence, or ranking it?

The seed chapter's rule of thumb, made explicit:

* recall stays low even deep in the list (k = 50…100): the evidence never
  reaches the candidates, so fix upstream: chunking, the embedding model,
  hybrid retrieval, query transformation;
* recall is high at 50 but low at 3: the evidence is found but ranked too
  low, so add or tune a reranker;
* precision is low while recall at the served k is good: serve fewer
  results, or rerank harder.

The curve is computed over the whole ranking a configuration produces (its
candidates), not only its ``top_k``, because "would a bigger k help?" is the
question it answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LOW_DEEP_RECALL = 0.7  # recall at the deepest k below this: evidence is not being found
HIGH_DEEP_RECALL = 0.8  # ... above this while recall@3 is low: evidence is found but ranked low
LOW_TOP_RECALL = 0.5
LOW_PRECISION = 0.2


@dataclass(frozen=True)
class Finding:
    kind: str  # upstream | ranking | precision | healthy
    message: str


def _at(curve: np.ndarray, k: int) -> float:
    return float(curve[min(k, len(curve)) - 1])


def diagnose(curve: np.ndarray, means: dict[str, float], top_k: int) -> list[Finding]:
    """What the curve says, in the order a user should act on it."""
    if len(curve) == 0:
        return [Finding("healthy", "no ranking to read (no answerable question)")]
    deepest = len(curve)
    deep_k = min(50, deepest)
    findings = []
    if _at(curve, deepest) < LOW_DEEP_RECALL:
        findings.append(
            Finding(
                "upstream",
                (
                    f"recall@{deepest} is only {_at(curve, deepest):.2f}: the evidence often never reaches the candidates. "
                    "Look upstream: chunking (size, overlap), the embedding model, hybrid BM25+dense, query transformation; "
                    "a reranker cannot fix what was never retrieved."
                ),
            )
        )
    elif _at(curve, deep_k) >= HIGH_DEEP_RECALL and _at(curve, 3) < LOW_TOP_RECALL:
        findings.append(
            Finding(
                "ranking",
                (
                    f"recall@{deep_k} is {_at(curve, deep_k):.2f} but recall@3 only {_at(curve, 3):.2f}: the evidence is found "
                    "but ranked too low. Add or tune a reranker (retrieval.rerank), or the fusion weight."
                ),
            )
        )
    precision = means.get(f"precision@{top_k}")
    served = means.get(f"recall@{top_k}", _at(curve, top_k))
    if precision is not None and precision < LOW_PRECISION and served >= HIGH_DEEP_RECALL:
        findings.append(
            Finding(
                "precision",
                (
                    f"precision@{top_k} is {precision:.2f} with recall@{top_k} {served:.2f}: most served results are noise. "
                    "Serve fewer (a smaller retrieval.top_k) or rerank harder."
                ),
            )
        )
    if not findings:
        findings.append(
            Finding(
                "healthy",
                (
                    f"recall@3 {_at(curve, 3):.2f}, recall@{deep_k} {_at(curve, deep_k):.2f}: neither finding nor ranking "
                    "stands out; compare configurations with `sweep compare`."
                ),
            )
        )
    return findings


def curve_text(curve: np.ndarray, marks=(1, 3, 5, 10, 20, 50, 100), bar_width: int = 40) -> str:
    lines = ["recall@k (whole ranking)"]
    for k in marks:
        if k <= len(curve):
            v = curve[k - 1]
            lines.append(f"  @{k:<4} {'#' * round(v * bar_width):<{bar_width}} {v:.3f}")
    return "\n".join(lines)


def describe(findings: list[Finding]) -> str:
    return "\n".join(f"diagnosis ({f.kind}): {f.message}" for f in findings)
