"""The semantic chunker: sentences grouped until their neighbours stop being alike.

Each document's sentences are embedded (through the pipeline's cached encoder, passed in as
``embed``); a chunk ends where the similarity of two neighbouring sentences drops below the
document's ``breakpoint_percentile``-th percentile (a topic shift), once it holds ``min_size``
units, and always before it would exceed ``size`` units.
"""

from __future__ import annotations

import numpy as np

from sweep.chunking.spans import length_of, sentences, split
from sweep.data.model import EvalSet


def semantic_chunks(eval_set: EvalSet, config, embed) -> list[list[tuple[int, int]]]:
    """Each document's semantic chunks, all sentences embedded in one call of ``embed``."""
    if embed is None:
        raise ValueError("the semantic chunker needs sentence embeddings (embed=)")
    per_doc = [sentences(d.text) for d in eval_set.documents]
    flat = [d.text[s:e] for d, found in zip(eval_set.documents, per_doc) for s, e in found]
    vectors = embed(flat) if flat else np.zeros((0, 1), np.float32)
    out, at = [], 0
    for document, found in zip(eval_set.documents, per_doc):
        out.append(semantic_groups(document.text, found, vectors[at : at + len(found)], config))
        at += len(found)
    return out


def semantic_groups(
    text: str, found: list[tuple[int, int]], vectors: np.ndarray, config
) -> list[tuple[int, int]]:
    """Sentences grouped into chunks at topic shifts, within ``min_size`` and ``size`` units.

    Args:
        text: the document's text.
        found: its sentence spans (:func:`sentences`).
        vectors: one unit-length embedding per sentence.
        config: a ``semantic`` chunking.

    Returns:
        ``[start, end)`` spans in order, each a run of whole sentences (or part of one too long).

    Example:
        >>> semantic_groups(text, sentences(text), embed([text[a:b] for a, b in sentences(text)]), cfg)  # doctest: +SKIP
    """
    if not found:
        return []
    length = length_of(text, config)
    similarity = np.einsum("ij,ij->i", vectors[:-1], vectors[1:]) if len(found) > 1 else np.zeros(0)
    cut = np.percentile(similarity, config.breakpoint_percentile) if len(similarity) > 1 else -np.inf
    out, first = [], 0
    for j in range(1, len(found) + 1):
        if j < len(found):
            start, end = found[first][0], found[j][1]
            shift = similarity[j - 1] < cut and length(found[first][0], found[j - 1][1]) >= config.min_size
            if not shift and length(start, end) <= config.size:
                continue
        span = (found[first][0], found[j - 1][1])
        if length(*span) > config.size:  # one sentence over size: split inside it
            out += split(text, span[0], span[1], list(config.separators), config, length)
        else:
            out.append(span)
        first = j
    return out


__all__ = ["semantic_chunks", "semantic_groups"]
