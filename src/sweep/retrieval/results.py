"""What every retrieval stage returns: ranked chunk indices and their scores."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

# query rows scored at once: about 40 bytes a (query, chunk) cell while a batch is ranked (the scores,
# their masked and negated copies, argpartition's indices), so ~160 MB whatever the corpus size
SCORE_CELLS = 4_000_000


@dataclass
class StageResult:
    """``ids``: int64 ``(questions, depth)`` chunk indices, best first, ``-1`` padded;
    ``scores``: float32, same shape, ``-inf`` where padded."""

    ids: np.ndarray
    scores: np.ndarray
    compute_seconds: float = 0.0  # what producing it cost when it was computed (not when read from a cache)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"ids": self.ids, "scores": self.scores, "compute_seconds": np.array([self.compute_seconds])}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "StageResult":
        seconds = float(arrays["compute_seconds"][0]) if "compute_seconds" in arrays else 0.0
        return cls(np.array(arrays["ids"]), np.array(arrays["scores"]), seconds)

    def head(self, k: int) -> "StageResult":
        return StageResult(self.ids[:, :k], self.scores[:, :k], self.compute_seconds)


def timed(search, *args) -> StageResult:
    """``search(*args)``, its own time set as the result's compute_seconds: what answering the queries cost.

    Args:
        search: a function returning a :class:`StageResult`.
        *args: its arguments.

    Returns:
        The result, with ``compute_seconds`` set.

    Example:
        >>> timed(lambda: StageResult(np.zeros((1, 1), np.int64), np.zeros((1, 1), np.float32))).compute_seconds >= 0
        True
    """
    t = time.perf_counter()
    result = search(*args)
    result.compute_seconds = time.perf_counter() - t
    return result


def top_k(scores: np.ndarray, k: int, keep=None) -> StageResult:
    """Best ``k`` per row of a dense ``(questions, chunks)`` score matrix.

    Ties keep the lower chunk index first (deterministic); entries where
    ``keep`` is False (no match, filtered out) are never returned.
    """
    n_q, n = scores.shape
    k_eff = min(k, n)
    scores = np.where(keep, scores, -np.inf) if keep is not None else scores
    if k_eff < n:
        part = np.argpartition(-scores, k_eff - 1, axis=1)[:, :k_eff]
    else:
        part = np.broadcast_to(np.arange(n), (n_q, n))
    part_scores = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -part_scores), axis=1)
    ids = np.take_along_axis(part, order, axis=1).astype(np.int64)
    top_scores = np.take_along_axis(part_scores, order, axis=1).astype(np.float32)
    ids[~np.isfinite(top_scores)] = -1
    out_ids = np.full((n_q, k), -1, dtype=np.int64)
    out_scores = np.full((n_q, k), -np.inf, dtype=np.float32)
    out_ids[:, :k_eff], out_scores[:, :k_eff] = ids, top_scores
    return StageResult(out_ids, out_scores)
