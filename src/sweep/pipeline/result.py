"""What evaluating one configuration produces: scores in both views, the ranking, costs and warnings.

Its own module so that readers of results (verdicts, tracking, reports) need not import the
pipeline that computes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sweep.chunking import ChunkSet
from sweep.config.schema import EvalConfig
from sweep.metrics import Scores
from sweep.retrieval import StageResult


@dataclass
class EvalResult:
    config: EvalConfig
    scores: Scores  # the configured view
    chunk_scores: Scores
    doc_scores: Scores
    run: StageResult
    recall_curve: (
        np.ndarray
    )  # mean recall@k for k = 1..len, over the untruncated ranking, in the configured view
    timings: dict[str, float] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    latency_ms: float = (
        0.0  # per question, at each stage's original compute cost (caches do not make it free)
    )
    dense_truncated_share: float | None = None  # chunks longer than the dense model reads; None without dense
    warnings: list[str] = field(
        default_factory=list
    )  # quality traps worth a line (truncation, merged evidence)
    dropped: list[str] = field(default_factory=list)  # what a --lenient load left out
    chunks: ChunkSet | None = None  # what run.ids index, for naming them in run files
    doc_ids: list[str] = field(default_factory=list)
    has_spans: bool = False  # span labels: run files name chunks; document labels: documents

    @property
    def encode_texts_per_s(self) -> float | None:
        """Texts this run sent to an embedding model per second of encoding; None when all came from the cache."""
        n, ms = self.counters.get("texts_encoded", 0), self.counters.get("encode_ms", 0)
        return 1000 * n / ms if n and ms else None

    def ranking(self) -> dict[str, list[tuple[str, float]]]:
        """Each question's ranking as ``[(id, score), ...]`` best first, as scored: document ids for
        document labels (a document at its best chunk), ``doc#start-end`` chunk ids for span labels."""
        c = self.chunks
        keep = kept_positions(self.run.ids, c.doc, len(self.doc_ids), by_document=not self.has_spans)
        if self.has_spans:
            name = lambda i: f"{self.doc_ids[c.doc[i]]}#{c.start[i]}-{c.end[i]}"  # noqa: E731
        else:
            name = lambda i: self.doc_ids[c.doc[i]]  # noqa: E731
        return {
            qid: [(name(i), s) for i, s in zip(row[mask].tolist(), srow[mask].tolist())]
            for qid, row, srow, mask in zip(
                self.chunk_scores.question_ids, self.run.ids, self.run.scores, keep
            )
        }


def kept_positions(run: np.ndarray, chunk_doc: np.ndarray, n_docs: int, by_document: bool) -> np.ndarray:
    """Which entries of a chunk ranking a reader sees: every filled one, or (``by_document``) each
    document's first, i.e. a document at its best chunk. The one rule behind run files, served hits
    and the document view's scores.

    Args:
        run: chunk indices, one row per question, ``-1`` padding.
        chunk_doc: each chunk's document index.
        n_docs: documents in the corpus.
        by_document: keep one entry per document.

    Returns:
        A boolean mask of ``run``'s shape.

    Example:
        >>> kept_positions(np.array([[0, 1, 2, -1]]), np.array([0, 0, 1]), 2, True).tolist()
        [[True, False, True, False]]
    """
    if not by_document:
        return run >= 0
    n_q, depth = run.shape
    docs = np.where(run >= 0, chunk_doc[np.maximum(run, 0)], -1)
    keys = np.where(docs >= 0, np.arange(n_q)[:, None] * n_docs + docs, -1).ravel()
    order = np.lexsort((np.arange(n_q * depth), keys))
    first = np.ones(len(order), dtype=bool)
    first[1:] = keys[order][1:] != keys[order][:-1]
    keep = np.zeros(n_q * depth, dtype=bool)
    keep[order[first]] = True
    return (keep & (keys >= 0)).reshape(n_q, depth)


def document_run(run: np.ndarray, chunk_doc: np.ndarray, n_docs: int) -> np.ndarray:
    """A document ranks at its best chunk: map chunks to documents, keep first occurrences, left-aligned."""
    n_q, depth = run.shape
    keep = kept_positions(run, chunk_doc, n_docs, by_document=True)
    rows, cols = np.nonzero(keep)
    out = np.full((n_q, depth), -1, dtype=np.int64)
    counts = np.bincount(rows, minlength=n_q)
    out[rows, np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)] = chunk_doc[run[keep]]
    return out


def merge_results(parts: list[EvalResult]) -> EvalResult:
    """Batches of one configuration's questions, joined as if run at once (every measure is per question)."""
    if len(parts) == 1:
        return parts[0]

    def join(scores: list[Scores]) -> Scores:
        return Scores(
            [q for s in scores for q in s.question_ids],
            {n: np.concatenate([s.values[n] for s in scores]) for n in scores[0].values},
            [q for s in scores for q in s.skipped],
            {k: v for s in scores for k, v in s.texts.items()},
        )

    sizes = np.array([len(r.scores.question_ids) for r in parts], dtype=np.float64)
    depth = min(len(r.recall_curve) for r in parts)
    curve = (np.stack([r.recall_curve[:depth] for r in parts]) * sizes[:, None]).sum(0) / max(sizes.sum(), 1)
    width = max(r.run.ids.shape[1] for r in parts)
    pad = lambda a, fill: np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=fill)  # noqa: E731
    run = StageResult(
        np.vstack([pad(r.run.ids, -1) for r in parts]), np.vstack([pad(r.run.scores, -np.inf) for r in parts])
    )
    timings: dict[str, float] = {}
    for r in parts:
        for k, v in r.timings.items():
            timings[k] = timings.get(k, 0.0) + v
    latency = float((np.array([r.latency_ms for r in parts]) * sizes).sum() / max(sizes.sum(), 1))
    return EvalResult(
        parts[0].config,
        join([r.scores for r in parts]),
        join([r.chunk_scores for r in parts]),
        join([r.doc_scores for r in parts]),
        run,
        curve,
        timings,
        parts[-1].counters,
        latency,
        chunks=parts[0].chunks,
        doc_ids=parts[0].doc_ids,
        has_spans=parts[0].has_spans,
    )


__all__ = ["EvalResult", "document_run", "kept_positions", "merge_results"]
