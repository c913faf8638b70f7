"""A ranking of small chunks turned into the ranking of their parents: what small-to-big serves."""

from __future__ import annotations

import numpy as np

from sweep.retrieval.results import StageResult


def expand_to_parents(result: StageResult, parent: np.ndarray) -> StageResult:
    """Replace each hit by its parent; a parent several hits share appears once, at its best hit.

    Args:
        result: a ranking of child chunks (``-1`` padded).
        parent: the parent index of every child chunk (:func:`sweep.chunking.parents.parent_of`).

    Returns:
        The parents in order of their first hit, with that hit's score, ``-1`` padded to the same depth.

    Example:
        >>> r = StageResult(np.array([[2, 0, 1, -1]]), np.array([[0.9, 0.8, 0.7, -np.inf]], np.float32))
        >>> expand_to_parents(r, np.array([5, 5, 6])).ids
        array([[6, 5, -1, -1]])
    """
    n_q, depth = result.ids.shape
    ids = np.where(result.ids >= 0, parent[np.maximum(result.ids, 0)], -1)
    rows = np.repeat(np.arange(n_q), depth)
    flat = ids.ravel()
    order = np.lexsort((np.tile(np.arange(depth), n_q), flat, rows))  # by row, parent, then rank
    first = np.ones(len(flat), dtype=bool)
    first[1:] = (rows[order][1:] != rows[order][:-1]) | (flat[order][1:] != flat[order][:-1])
    keep = np.zeros(len(flat), dtype=bool)
    keep[order[first]] = True
    keep &= flat >= 0
    keep = keep.reshape(n_q, depth)
    position = np.cumsum(keep, axis=1) - 1  # where each kept parent lands in its row
    out_ids = np.full((n_q, depth), -1, dtype=np.int64)
    out_scores = np.full((n_q, depth), -np.inf, dtype=np.float32)
    r, c = np.nonzero(keep)
    out_ids[r, position[r, c]] = ids[r, c]
    out_scores[r, position[r, c]] = result.scores[r, c]
    return StageResult(out_ids, out_scores, result.compute_seconds)


__all__ = ["expand_to_parents"]
