"""Small-to-big: which larger parent chunk each small chunk lies in.

Retrieval ranks the small chunks (precise embeddings, precise BM25 statistics);
the application is served the parent each hit lies in (more context).
"""

from __future__ import annotations

import numpy as np

from sweep.chunking.chunkers import ChunkSet


def parent_of(children: ChunkSet, parents: ChunkSet) -> np.ndarray:
    """For every child chunk, the index of the parent chunk that overlaps it most.

    Ties go to the earlier parent; a child that overlaps no parent (only whitespace between two
    parents) goes to the nearest parent before it in its document, or after it if none is before.

    Args:
        children: the chunks retrieval ranks.
        parents: chunks of the same documents, sorted by document and start (as chunkers return them).

    Returns:
        int64 array, one parent index per child.

    Example:
        >>> kids = ChunkSet(np.array([0, 0]), np.array([0, 6]), np.array([5, 11]), ["hello", "world"])
        >>> parent_of(kids, ChunkSet(np.array([0]), np.array([0]), np.array([11]), ["hello world"]))
        array([0, 0])
    """
    if len(parents) == 0:
        raise ValueError("no parent chunks to expand to")
    width = int(max(children.end.max(initial=0), parents.end.max(initial=0))) + 1
    parent_start = parents.doc * width + parents.start
    child_start = children.doc * width + children.start
    child_end = children.doc * width + children.end
    first = np.searchsorted(parent_start, child_start, side="right") - 1  # last parent starting at or before
    last = np.searchsorted(parent_start, child_end, side="left") - 1  # last parent starting inside
    out = np.empty(len(children), dtype=np.int64)
    for i in range(len(children)):
        lo, hi = max(int(first[i]), 0), max(int(last[i]), 0)
        candidates = np.arange(lo, hi + 1)
        same = candidates[parents.doc[candidates] == children.doc[i]]
        if len(same) == 0:  # the document's first parent starts after the child ends
            out[i] = int(np.searchsorted(parents.doc, children.doc[i], side="left"))
            continue
        overlap = np.minimum(parents.end[same], children.end[i]) - np.maximum(
            parents.start[same], children.start[i]
        )
        out[i] = int(same[np.argmax(overlap)])
    if np.any(parents.doc[out] != children.doc):
        raise ValueError("a document has chunks but no parent chunk")
    return out


__all__ = ["parent_of"]
