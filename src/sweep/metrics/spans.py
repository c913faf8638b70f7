"""Character-level recall, precision and IoU of retrieved chunks (Chroma's definitions).

For one question with excerpts E and the top-n retrieved chunks C
(Smith & Troynikov, "Evaluating Chunking Strategies for Retrieval", Chroma 2024):

* covered   = characters of the union over excerpts of (excerpt ∩ some chunk)
* recall    = covered / Σ|e|
* precision = covered / Σ|c|            (all n chunks, overlaps counted)
* IoU       = covered / (Σ|c| + Σ uncovered characters of each excerpt)

Vectorised: interval unions per group are one sort plus a running maximum,
with groups pushed apart by an offset so the maximum never leaks between them.
"""

from __future__ import annotations

import numpy as np

from sweep.chunking.chunkers import ChunkSet
from sweep.labels import Labels


def _union_length(group: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int) -> np.ndarray:
    """Total length of the union of intervals in each group."""
    out = np.zeros(n_groups, dtype=np.int64)
    if len(group) == 0:
        return out
    span = int(end.max()) + 1
    s = group * span + start
    e = group * span + end
    order = np.argsort(s, kind="stable")
    s, e, g = s[order], e[order], group[order]
    reach = np.maximum.accumulate(e)
    prev_reach = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
    contribution = np.maximum(0, e - np.maximum(s, prev_reach))
    np.add.at(out, g, contribution)
    return out


def span_metrics(run: np.ndarray, labels: Labels, chunks: ChunkSet, n: int) -> dict[str, np.ndarray]:
    """``char_recall@n``, ``char_precision@n`` and ``char_iou@n`` per question."""
    top = np.asarray(run, dtype=np.int64)[:, :n]
    n_q = labels.n_questions
    valid = top >= 0
    chunk_len = np.where(valid, chunks.end[top] - chunks.start[top], 0)
    retrieved_chars = chunk_len.sum(axis=1)

    item_len = labels.item_end - labels.item_start
    excerpt_chars = np.bincount(labels.item_question, weights=item_len, minlength=n_q)

    # every (item, retrieved chunk of the same question) pair and its intersection
    q_of_item = labels.item_question
    cand = top[q_of_item]  # (items, n)
    ok = cand >= 0
    item_idx = np.repeat(np.arange(len(q_of_item)), ok.sum(axis=1))
    chunk_idx = cand[ok]
    same_doc = chunks.doc[chunk_idx] == labels.item_doc[item_idx]
    item_idx, chunk_idx = item_idx[same_doc], chunk_idx[same_doc]
    lo = np.maximum(chunks.start[chunk_idx], labels.item_start[item_idx])
    hi = np.minimum(chunks.end[chunk_idx], labels.item_end[item_idx])
    hit = hi > lo
    item_idx, lo, hi = item_idx[hit], lo[hit], hi[hit]

    # covered characters of the question: union of all intersections; excerpts of
    # one question may share characters, so positions are made document-global
    doc_offset = labels.item_doc[item_idx] * (int(chunks.end.max(initial=0)) + 1)
    covered = _union_length(q_of_item[item_idx], doc_offset + lo, doc_offset + hi, n_q)
    covered_per_item = _union_length(item_idx, lo, hi, len(q_of_item))
    uncovered = np.bincount(q_of_item, weights=item_len - covered_per_item, minlength=n_q)

    def ratio(num, den):
        return np.divide(num, den, out=np.zeros(n_q), where=den > 0)

    return {
        f"char_recall@{n}": ratio(covered.astype(np.float64), excerpt_chars),
        f"char_precision@{n}": ratio(covered.astype(np.float64), retrieved_chars.astype(np.float64)),
        f"char_iou@{n}": ratio(covered.astype(np.float64), retrieved_chars + uncovered),
    }
