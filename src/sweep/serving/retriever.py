"""The tuned configuration as a retriever an application calls: the sweep's own code path, new queries.

``Retriever`` wraps the same :class:`~sweep.pipeline.Pipeline` a trial runs, in its serving mode
(indexes built once and kept, stage outputs not cached), so a question the sweep scored gets exactly
the ranking the sweep scored: same chunks, same BM25 and FAISS indexes, same fusion and reranker,
and the embeddings from the same cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sweep.config.load import load_config
from sweep.config.schema import EvalConfig
from sweep.pipeline.prepare import passing_chunks
from sweep.pipeline.result import kept_positions
from sweep.pipeline.runner import Pipeline
from sweep.retrieval.filters import Filters


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk: where it is in which document, its text and its score.

    ``score`` is the last stage's (fused or reranked) score; the order of the hits is the ranking,
    even where two scores tie.
    """

    doc_id: str
    start: int  # character offsets of the chunk in the document's text, [start, end)
    end: int
    text: str
    score: float
    chunk_id: str  # ``doc_id#start-end``: names the chunk in run files
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


class Retriever:
    """The configured pipeline (chunking, BM25 / dense / hybrid, reranker, query transformation,
    filters) over the configuration's corpus, answering new questions.

    Args:
        config: a validated configuration (see :func:`sweep.load_config`).
        pipeline: a serving :class:`~sweep.pipeline.Pipeline` to reuse; by default one on the
            configuration's cache directory, so embeddings computed by the sweep are read, not recomputed.

    Example:
        >>> retriever = Retriever.from_config("runs/export/best_config.yaml")
        >>> hits = retriever.search("How do I define a generator?", k=3)
        >>> hits[0].doc_id, hits[0].text[:40]
    """

    def __init__(self, config: EvalConfig, pipeline: Pipeline | None = None):
        self.config = config
        self.pipeline = pipeline or Pipeline(config.cache_dir, progress=False, serving=True)
        self._prepared = self.pipeline.prepare(config)
        self._filters: dict[tuple, np.ndarray] = {}

    @classmethod
    def from_config(cls, config: str | Path | EvalConfig, overrides: Sequence[str] = ()) -> "Retriever":
        """Build the retriever a configuration describes.

        Args:
            config: a YAML file (a sweep's ``best_config.yaml``, or any config; its ``search:``
                section is ignored) or an :class:`EvalConfig`.
            overrides: ``key=value`` changes, as on the command line (files only).

        Returns:
            A :class:`Retriever`, its indexes built (the chunks are embedded unless the cache has them).

        Example:
            >>> Retriever.from_config("best_config.yaml", ["retrieval.top_k=5"]).search("what is a closure?")
        """
        if not isinstance(config, EvalConfig):
            config = load_config(config, list(overrides))
        return cls(config)

    @property
    def documents(self):
        return self._prepared.eval_set.documents

    def search(
        self,
        text: str,
        k: int | None = None,
        filters: Mapping[str, Any] | None = None,
        rewrites: Sequence[str] = (),
    ) -> list[Hit]:
        """The best ``k`` hits for one question.

        Args:
            text: the question.
            k: how many hits (default: the configuration's ``retrieval.top_k``); at most the
                configuration's candidates.
            filters: document metadata that must match exactly, e.g. ``{"lang": "en"}``.
            rewrites: other phrasings of the question, for ``retrieval.query.transform: multi_query``.

        Returns:
            Hits, best first. In the document view (``evaluation.view: document``) each document
            appears once, at its best chunk, as the sweep scored it.

        Example:
            >>> [h.chunk_id for h in retriever.search("what does yield do?", k=2)]
            ['expressions#10233-10940', 'simple_stmts#8123-8871']
        """
        return self.search_many([text], k, [filters] if filters else None, [list(rewrites)])[0]

    def search_many(
        self,
        texts: Sequence[str],
        k: int | None = None,
        filters: Sequence[Mapping[str, Any] | None] | None = None,
        rewrites: Sequence[Sequence[str]] | None = None,
    ) -> list[list[Hit]]:
        """:meth:`search` for many questions at once (one batch per stage: much faster than a loop).

        Args:
            texts: the questions.
            k: hits per question (default ``retrieval.top_k``).
            filters: one metadata filter (or None) per question.
            rewrites: other phrasings per question (multi_query).

        Returns:
            One list of hits per question, in the order of ``texts``.

        Example:
            >>> len(retriever.search_many(["q one", "q two"], k=5))
            2
        """
        if not texts:
            return []
        p = self._prepared
        allowed = None
        if filters and any(filters):
            keys = [tuple(sorted((f or {}).items(), key=lambda kv: kv[0])) for f in filters]
            allowed = Filters.build(keys, self._allowed)
        served = dataclasses.replace(
            p,
            queries=list(texts),
            allowed=allowed,
            inputs_key=None,
            rewrites=[list(r) for r in rewrites] if rewrites else [[] for _ in texts],
        )
        ranking = self.pipeline.retrieve(served, self.config, {}).head(k or self.config.retrieval.top_k)
        return self._hits(ranking.ids, ranking.scores)

    def _allowed(self, key: tuple) -> np.ndarray:
        """The chunks one filter (its sorted items) lets through, computed once per filter."""
        if key not in self._filters:
            self._filters[key] = passing_chunks(self.documents, self._prepared.chunks, dict(key))
        return self._filters[key]

    def _hits(self, ids: np.ndarray, scores: np.ndarray) -> list[list[Hit]]:
        """Each row's hits, by the sweep's rule (:func:`kept_positions`): one per document in the document view."""
        chunks, docs = self._prepared.served[0], self.documents  # parents, with retrieval.expand
        keep = kept_positions(ids, chunks.doc, len(docs), self.config.evaluation.view == "document")
        out = []
        for row, srow, mask in zip(ids, scores, keep):
            hits = []
            for i, s in zip(row[mask].tolist(), srow[mask].tolist()):
                doc, start, end = docs[int(chunks.doc[i])], int(chunks.start[i]), int(chunks.end[i])
                hits.append(
                    Hit(
                        doc.id,
                        start,
                        end,
                        chunks.texts[i],
                        float(s),
                        f"{doc.id}#{start}-{end}",
                        doc.title,
                        dict(doc.metadata),
                    )
                )
            out.append(hits)
        return out


__all__ = ["Hit", "Retriever"]
