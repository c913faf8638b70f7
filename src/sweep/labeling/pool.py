"""Judging pools the TREC way: the union of several diverse retrievers' top results per question.

A pool is what a person judges for one question. It is built from retrievers unlike each other
(by default BM25, dense and hybrid at the config's chunking), so that what one misses another
may find; overlapping passages of one document become one (their union span), and the order is a
seeded shuffle, so it reveals neither the retriever nor the rank.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sweep.config.load import with_values
from sweep.config.schema import EvalConfig
from sweep.data.model import Question
from sweep.serving.retriever import Hit, Retriever

DEFAULT_MODES = ("bm25", "dense", "hybrid")


@dataclass(frozen=True)
class Passage:
    """One passage to judge: a span of a document, and which pooled retrievers ranked it (hidden)."""

    doc_id: str
    start: int
    end: int
    sources: tuple[str, ...] = field(default=(), compare=False)

    @property
    def id(self) -> str:
        return f"{self.doc_id}#{self.start}-{self.end}"


def pool_configs(config: EvalConfig, modes: Sequence[str] = DEFAULT_MODES) -> dict[str, EvalConfig]:
    """The configuration itself with each retrieval mode: the default pooling retrievers.

    Args:
        config: the labelling configuration (its dataset, chunking and models).
        modes: retrieval modes to pool.

    Returns:
        ``{mode: config}``; no reranker, so each mode is itself.

    Example:
        >>> sorted(pool_configs(load_config("configs/hybrid.yaml")))  # doctest: +SKIP
        ['bm25', 'dense', 'hybrid']
    """
    return {
        mode: with_values(config, {"retrieval.mode": mode, "retrieval.rerank.enabled": False})
        for mode in modes
    }


def merge_overlapping(hits: Sequence[tuple[str, Hit]]) -> list[Passage]:
    """Hits of one question as passages: overlapping spans of one document merged into their union.

    Args:
        hits: ``(retriever name, hit)`` pairs.

    Returns:
        Passages, no two of one document overlapping, each naming the retrievers behind it.

    Example:
        >>> merge_overlapping([("bm25", hit_a), ("dense", hit_b)])  # doctest: +SKIP
    """
    return _union([Passage(hit.doc_id, hit.start, hit.end, (name,)) for name, hit in hits])


def _union(passages: list[Passage]) -> list[Passage]:
    """Overlapping passages of one document merged into one over their union, sources joined."""
    out: list[Passage] = []
    for p in sorted(passages, key=lambda p: (p.doc_id, p.start, p.end)):
        last = out[-1] if out else None
        if last is not None and last.doc_id == p.doc_id and p.start < last.end:  # overlaps it
            out[-1] = Passage(
                p.doc_id, last.start, max(last.end, p.end), tuple(sorted(set(last.sources) | set(p.sources)))
            )
        else:
            out.append(p)
    return out


def extend_pool(question_id: str, pool: list[Passage], more: list[Passage], seed: int = 0) -> list[Passage]:
    """A pool with more passages: overlapping ones merged (their sources joined), blind-ordered again.

    Args:
        question_id: whose pool (it seeds the order).
        pool: the passages so far (some judged: judgments follow spans, not positions).
        more: new passages, e.g. the top results of a sweep's best configuration.
        seed: for the display order.

    Returns:
        The merged pool.

    Example:
        >>> extend_pool("q1", [Passage("a", 0, 10, ("bm25",))], [Passage("a", 5, 20, ("best",))])  # doctest: +SKIP
        [Passage(doc_id='a', start=0, end=20, sources=('best', 'bm25'))]
    """
    return blind_order(question_id, _union(pool + more), seed)


def blind_order(question_id: str, passages: list[Passage], seed: int = 0) -> list[Passage]:
    """A seeded shuffle: the same pool always shows in the same order, which says nothing of rank."""

    def key(p: Passage) -> str:
        return hashlib.sha256(f"{seed}:{question_id}:{p.id}".encode()).hexdigest()

    return sorted(passages, key=key)


def build_pools(
    questions: Sequence[Question], retrievers: Mapping[str, Retriever], depth: int = 10, seed: int = 0
) -> dict[str, list[Passage]]:
    """Each question's pool: the union of every retriever's top ``depth``, merged and blind-ordered.

    Args:
        questions: what to pool for (their filters apply, as in the sweep).
        retrievers: ``{name: retriever}``, e.g. built from :func:`pool_configs`.
        depth: how many results of each retriever enter the pool.
        seed: for the display order.

    Returns:
        ``{question id: passages}``.

    Example:
        >>> pools = build_pools(eval_set.questions, {"bm25": Retriever(cfg)}, depth=5)  # doctest: +SKIP
    """
    texts = [q.text for q in questions]
    filters = [q.filters or None for q in questions]
    rewrites = [list(q.metadata.get("rewrites", [])) for q in questions]
    found: dict[str, list[tuple[str, Hit]]] = {q.id: [] for q in questions}
    for name, retriever in retrievers.items():
        ranked = retriever.search_many(texts, depth, filters, rewrites)
        for q, hits in zip(questions, ranked):
            found[q.id] += [(name, h) for h in hits[:depth]]
    return {qid: blind_order(qid, merge_overlapping(hits), seed) for qid, hits in found.items()}


__all__ = [
    "DEFAULT_MODES",
    "Passage",
    "blind_order",
    "build_pools",
    "extend_pool",
    "merge_overlapping",
    "pool_configs",
]
