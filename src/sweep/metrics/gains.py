"""From a run (ranked chunk indices) and labels to dense per-rank gain matrices.

Each evidence item is credited once, at the first rank whose chunk hits it
(design.md). A rank's *gain* is the highest grade it newly credits, and it
is *relevant* when it newly credits an item at ``grade >= threshold``. Later
chunks that hit only already-credited items are not relevant: duplicates can
never push a measure above 1 (LlamaIndex #22683, Haystack #11959).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.labels import Labels


@dataclass
class JudgedRanks:
    """Where judged chunks rank: every judged rank, and the first rank of each judged non-relevant item."""

    question: np.ndarray  # int64, sorted by (question, rank)
    rank: np.ndarray
    nonrel_position: np.ndarray  # int64 question * depth + rank, sorted (one per non-relevant item)
    n_nonrelevant: np.ndarray  # int64 (questions,): N


@dataclass
class RankedGains:
    """The ranks that gain anything, as sparse arrays sorted by (question, rank).

    Relevance is sparse (a few relevant ranks among k), so the kernels read
    only these entries: no dense ``(questions, depth)`` matrix is built.
    """

    n_questions: int
    depth: int
    question: np.ndarray  # int64 row of each entry
    rank: np.ndarray  # int64, 0-based
    gain: np.ndarray  # float64: highest grade newly credited at this rank
    credited: np.ndarray  # int64: relevant items newly credited at this rank
    n_relevant: np.ndarray  # int64 (questions,): R
    ideal: np.ndarray  # float64 (questions, ideal depth): grades sorted descending
    judged: JudgedRanks | None = None  # only when judged@k or bpref is asked for

    @property
    def relevant(self) -> np.ndarray:
        return self.credited > 0


def ranked_gains(run: np.ndarray, labels: Labels, ideal_depth: int = 1, judged: bool = False) -> RankedGains:
    """``run``: int ``(questions, depth)`` chunk indices in rank order, ``-1`` for none.

    Rows follow ``labels.question_ids``; ``judged``: also where the judged chunks rank.
    """
    run = np.asarray(run, dtype=np.int64)
    if run.ndim != 2 or run.shape[0] != labels.n_questions:
        raise ValueError(f"run must be ({labels.n_questions}, depth), got {run.shape}")
    n_q, depth = run.shape

    # pre-filter with a hash set of the labelled (question, chunk) keys, so the
    # exact join in sparse_gains only sees a few candidate ranks, not all of them
    keys = np.arange(n_q, dtype=np.int64)[:, None] * labels.n_chunks + run
    table, shift = _hash_table(labels.judged_key if judged else labels.pair_key)  # judged keys: a superset
    rows, cols = np.nonzero(table[_hash(keys, shift)])
    keep = run[rows, cols] >= 0  # padding
    rows, cols = rows[keep], cols[keep]
    return sparse_gains(labels, rows, cols, run[rows, cols], depth, ideal_depth, judged)


def sparse_gains(
    labels: Labels,
    rows: np.ndarray,
    cols: np.ndarray,
    chunks: np.ndarray,
    depth: int,
    ideal_depth: int = 1,
    judged: bool = False,
) -> RankedGains:
    """The gains of retrieved entries given sparsely: chunk ``chunks[i]`` at rank ``cols[i]`` of
    question row ``rows[i]``; entries that hit no label are ignored, in any order.

    What :func:`ranked_gains` does after finding the candidates, and what a caller that already
    knows where the judged chunks rank (``sweep.score``) calls without building the run matrix.

    Args:
        labels: the labels the rows follow.
        rows, cols, chunks: parallel int arrays (question row, 0-based rank, chunk index).
        depth: the run's depth (the longest ranking).
        ideal_depth: the depth of the ideal gains (NDCG's largest k).
        judged: also where the judged chunks rank (for judged@k and bpref).

    Returns:
        The :class:`RankedGains` the kernels read.

    Example:
        >>> g = sparse_gains(labels, np.array([0]), np.array([2]), np.array([7]), depth=10)  # doctest: +SKIP
    """
    n_q = labels.n_questions
    position, item = _first_hits(
        *_matches(labels.pair_key, labels.pair_item, rows, cols, chunks, labels.n_chunks, depth)
    )
    grade = labels.item_grade[item].astype(np.float64)
    relevant = (grade >= labels.threshold).astype(np.int64)

    # one entry per position: highest grade, count of relevant items credited there
    order = np.lexsort((-grade, position))
    position, grade, relevant = position[order], grade[order], relevant[order]
    starts = np.flatnonzero(np.r_[True, position[1:] != position[:-1]]) if len(position) else np.zeros(0, int)
    credited = np.add.reduceat(relevant, starts) if len(starts) else np.zeros(0, dtype=np.int64)
    position = position[starts]
    return RankedGains(
        n_questions=n_q,
        depth=depth,
        question=position // depth,
        rank=position % depth,
        gain=grade[starts],
        credited=credited,
        n_relevant=labels.n_relevant(),
        ideal=labels.ideal_gains(ideal_depth),
        judged=_judged_ranks(labels, rows, cols, chunks, depth) if judged else None,
    )


def find_sorted(sorted_key: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which ``keys`` occur in ``sorted_key`` (a mask), and the position of each one's first match.

    Args:
        sorted_key: int64 keys, sorted.
        keys: int64 keys to look up.

    Returns:
        ``(found, at)``: ``sorted_key[at[i]] == keys[i]`` where ``found[i]``.

    Example:
        >>> find_sorted(np.array([2, 5, 5, 9]), np.array([5, 3, 9]))
        (array([ True, False,  True]), array([1, 1, 3]))
    """
    at = np.searchsorted(sorted_key, keys, side="left")
    found = np.zeros(len(keys), dtype=bool)
    inside = at < len(sorted_key)
    found[inside] = sorted_key[at[inside]] == keys[inside]
    return found, at


def _matches(sorted_key, sorted_item, rows, cols, chunks, n_chunks: int, depth: int):
    """Every (position, item) pair an entry hits: position = row * depth + col."""
    keys = rows.astype(np.int64) * n_chunks + chunks
    found, lo = find_sorted(sorted_key, keys)
    rows, cols, keys, lo = rows[found], cols[found], keys[found], lo[found]
    counts = np.searchsorted(sorted_key, keys, side="right") - lo
    position = np.repeat(rows.astype(np.int64) * depth + cols, counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return position, sorted_item[np.repeat(lo, counts) + offsets]


def _first_hits(position: np.ndarray, item: np.ndarray):
    """Each item's first hit: positions increase with rank inside a question, so the first occurrence
    of each item in (item, position) order is its first hit."""
    order = np.lexsort((position, item))
    item, position = item[order], position[order]
    first = np.ones(len(item), dtype=bool)
    first[1:] = item[1:] != item[:-1]
    return position[first], item[first]


def _judged_ranks(labels: Labels, rows, cols, chunks, depth: int) -> JudgedRanks:
    position, item = _matches(
        labels.judged_key, labels.judged_item, rows, cols, chunks, labels.n_chunks, depth
    )
    judged = np.unique(position)
    position, item = _first_hits(position, item)
    nonrel = np.sort(position[~labels.judged_relevant[item]])
    return JudgedRanks(judged // depth, judged % depth, nonrel, labels.n_nonrelevant())


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4)


def _hash(keys: np.ndarray, shift: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (keys.view(np.uint64) * _GOLDEN) >> np.uint64(shift)  # keys are >= 0 where it matters


def _hash_table(pair_key: np.ndarray) -> tuple[np.ndarray, int]:
    bits = int(np.clip(np.ceil(np.log2(max(len(pair_key), 1) * 16)), 10, 26))
    shift = 64 - bits
    table = np.zeros(1 << bits, dtype=bool)
    table[_hash(pair_key, shift)] = True
    return table, shift
