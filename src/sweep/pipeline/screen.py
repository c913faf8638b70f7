"""Screening: a (model, chunking) pair scored on a small candidate pool before its corpus is encoded.

A sweep's wall time is almost all encoding chunk sets with models. The pool is the union of BM25's
top ``pool`` chunks per tuning question: dense retrieval alone, ranked over the pool, costs a few
thousand encodings instead of the corpus, and ranks pairs nearly as their full scores do
(``scripts/screen_check.py`` measures how nearly). The pool's vectors land in the same cache as the
corpus's, so a pair that survives screening encodes only what the pool left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sweep.config.schema import EvalConfig, QueryConfig
from sweep.pipeline.scoring import score_ranking
from sweep.retrieval import StageResult
from sweep.retrieval.expand import expand_to_parents
from sweep.retrieval.results import top_k

if TYPE_CHECKING:
    from sweep.pipeline.runner import Pipeline


@dataclass(frozen=True)
class PoolScore:
    """What screening measured for one configuration's (model, chunking) pair."""

    value: float  # the objective of dense retrieval alone, ranked over the pool
    pool: int  # chunks in the pool: what screening encodes
    chunks: int  # chunks in the corpus: what the full encoding costs


def pool_score(pipeline: Pipeline, config: EvalConfig, objective: str, pool: int) -> PoolScore | None:
    """The objective of ``config``'s dense model and chunking over the BM25 candidate pool.

    Query rewriting, fusion and the reranker are left out: the pool score judges the pair, which is
    what costs encoding, so every configuration sharing a pair gets the same score.

    Args:
        pipeline: the sweep's pipeline (its caches: the pool's BM25 run and vectors are kept).
        config: one trial's configuration.
        objective: the metric to score, e.g. ``ndcg@10``.
        pool: BM25 candidates per question whose union is the pool.

    Returns:
        The score, or None when ``config`` retrieves with BM25 alone (nothing to screen).

    Example:
        >>> pool_score(Pipeline(".cache"), config, "ndcg@10", pool=200).value  # doctest: +SKIP
        0.6431
    """
    r = config.retrieval
    if r.mode == "bm25":
        return None
    p = pipeline.prepare(config)
    lexical = config.model_copy(
        update={
            "retrieval": r.model_copy(update={"mode": "bm25", "candidates": pool, "query": QueryConfig()})
        }
    )
    candidates = pipeline.bm25(p, lexical, {}).ids
    members = np.unique(candidates[candidates >= 0])
    c = r.dense
    encoder = pipeline.encoder(c, config)
    label = f"{pipeline.label}: " * bool(pipeline.label) + f"screening {c.model} on {len(members)} chunks"
    vectors = encoder.encode([p.index_texts[i] for i in members], c.document_prefix, label)
    queries = encoder.encode(p.queries, c.query_prefix)
    keep = None if p.allowed is None else p.allowed.dense()[:, members]
    found = top_k(queries @ vectors.T, max(r.top_k, r.candidates), keep)
    deep = StageResult(np.where(found.ids >= 0, members[np.maximum(found.ids, 0)], -1), found.scores)
    if p.parents is not None:
        deep = expand_to_parents(deep, p.parents.of)
    chunk_scores, doc_scores, _ = score_ranking(p, config, deep, deep.head(r.top_k), [objective])
    scores = doc_scores if config.evaluation.view == "document" else chunk_scores
    return PoolScore(float(scores.mean()[objective]), len(members), len(p.chunks))


__all__ = ["PoolScore", "pool_score"]
