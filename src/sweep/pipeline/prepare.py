"""What every trial with the same data and chunking shares: chunks, labels, queries, filter masks."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sweep.cache import content_key
from sweep.chunking import ChunkingConfig, ChunkSet, chunk_corpus
from sweep.chunking.parents import parent_of
from sweep.config.schema import EvalConfig
from sweep.data import EvalSet
from sweep.labels import HitRule, Labels, resolve_labels
from sweep.retrieval.filters import Filters

TRUNCATION_WARN = 0.05  # a share of truncated chunks worth a warning


@dataclass
class Parents:
    """Small-to-big: the chunks served in place of the retrieved ones, and the labels resolved on them."""

    chunks: ChunkSet
    labels: Labels
    of: np.ndarray  # the parent index of every retrieved chunk


@dataclass
class Prepared:
    """What every trial with the same data and chunking shares."""

    eval_set: EvalSet
    chunks: ChunkSet
    index_texts: list[str]  # what retrievers see: chunk text, title-prefixed if configured
    labels: Labels
    doc_labels: Labels
    queries: list[str]  # answerable questions, in label order
    allowed: Filters | None  # each question's metadata filter over the chunks, None when no filters
    has_spans: bool
    key: str
    inputs_key: str | None = None  # the index texts, queries and filters, hashed once (Pipeline._inputs_key)
    rewrites: list[list[str]] = field(default_factory=list)  # per answerable question, for multi_query
    parents: Parents | None = None  # retrieval.expand: parent
    texts_key: str | None = None  # the index texts alone: BM25's term counts depend on nothing else

    @property
    def served(self) -> tuple[ChunkSet, Labels]:
        """The chunks an application receives and the labels that score them (parents when expanded)."""
        if self.parents is None:
            return self.chunks, self.labels
        return self.parents.chunks, self.parents.labels

    def subset(self, rows: np.ndarray) -> "Prepared":
        """The same chunks with only questions ``rows`` (sorted label indices): one batch of a pruned trial."""
        rows = np.asarray(rows, dtype=np.int64)
        return Prepared(
            self.eval_set,
            self.chunks,
            self.index_texts,
            self.labels.subset(rows),
            self.doc_labels.subset(rows),
            [self.queries[i] for i in rows],
            None if self.allowed is None else self.allowed[rows],
            self.has_spans,
            content_key(self.key, rows.tobytes()),
            None,
            [self.rewrites[i] for i in rows],
            self.parents and Parents(self.parents.chunks, self.parents.labels.subset(rows), self.parents.of),
        )


def build_prepared(
    eval_set: EvalSet,
    config: EvalConfig,
    chunking: ChunkingConfig,
    key: str,
    embed=None,
    labelled: bool = True,
) -> Prepared:
    """Chunk the corpus, resolve the labels on the chunks and on whole documents, build the filter mask.

    ``embed`` (texts -> unit vectors, cached) serves the semantic chunker. ``labelled=False`` (serving:
    the questions are the users') resolves no label: the labels are empty."""
    chunks = chunk_corpus(eval_set, chunking, embed)
    docs = eval_set.documents
    if config.dataset.include_title:
        index_texts = [
            f"{docs[d].title} {t}" if docs[d].title else t for d, t in zip(chunks.doc, chunks.texts)
        ]
    else:
        index_texts = list(chunks.texts)
    if chunking.heading_prefix and chunks.headings:  # the section's place, as a reader sees it
        index_texts = [f"{h}\n{t}" if h else t for h, t in zip(chunks.headings, index_texts)]
    threshold = config.dataset.relevance_threshold
    rule = HitRule(config.evaluation.hit_min_overlap)
    judged = eval_set if labelled else eval_set.with_questions([])
    labels = resolve_labels(judged, chunks, rule, threshold)
    whole = chunk_corpus(eval_set, ChunkingConfig("document")) if labelled else chunks
    doc_labels = resolve_labels(judged, whole, rule, threshold)
    answerable, _ = eval_set.answerable(threshold)
    allowed = None
    if any(q.filters for q in answerable):
        keys = [repr(sorted(q.filters.items())) for q in answerable]  # values may be lists: keyed by repr
        by_key = dict(zip(keys, (q.filters for q in answerable)))
        allowed = Filters.build(keys, lambda key: passing_chunks(docs, chunks, by_key[key]))
    has_spans = any(e.start is not None for q in answerable for e in q.evidence)
    parents = None
    if (e := config.retrieval.expand).to == "parent":
        cut = ChunkingConfig(e.strategy, e.size, 0, e.unit or chunking.unit, chunking.tokenizer)
        whole_parents = chunk_corpus(eval_set, cut)
        parents = Parents(
            whole_parents,
            resolve_labels(judged, whole_parents, rule, threshold),
            parent_of(chunks, whole_parents),
        )
    prepared = Prepared(
        eval_set,
        chunks,
        index_texts,
        labels,
        doc_labels,
        [q.text for q in answerable],
        allowed,
        has_spans,
        key,
        None,
        [list(q.metadata.get("rewrites", [])) for q in answerable],
        parents,
    )
    return prepared


def trial_warnings(p: Prepared, config: EvalConfig, share: float | None) -> list[str]:
    """What a user should know about this run's numbers: truncated chunks, merged evidence."""
    out = []
    if share is not None and share >= TRUNCATION_WARN:
        c, k = config.retrieval.dense, config.chunking
        unit = "sentences" if k.strategy == "sentence" else k.unit  # a sentence window counts sentences
        chunks = "whole documents" if k.strategy == "document" else f"{k.strategy}, size {k.size} {unit}"
        out.append(
            f"{share:.0%} of the chunks ({chunks}) are longer "
            f"than {c.model}'s max_seq_length and are truncated when embedded: dense scores ignore their "
            "ends; use smaller chunks or raise retrieval.dense.max_seq_length"
        )
    if p.eval_set.merged_evidence:
        out.append(
            f"{p.eval_set.merged_evidence} overlapping evidence span(s) were merged into one item each "
            "(dataset.merge_overlapping_evidence: false keeps them apart)"
        )
    return out


__all__ = ["Parents", "Prepared", "TRUNCATION_WARN", "build_prepared", "trial_warnings"]


def passing_chunks(documents, chunks: ChunkSet, filters: dict) -> np.ndarray:
    """The chunks whose document's metadata has every ``filters`` key at its value (bool, per chunk).

    Args:
        documents: the corpus, indexed as ``chunks.doc`` indexes it.
        chunks: the chunk set.
        filters: metadata key -> required value.

    Returns:
        A bool array over the chunks.

    Example:
        >>> passing_chunks(eval_set.documents, chunks, {"lang": "en"}).sum()  # doctest: +SKIP
        812
    """
    ok = np.ones(len(documents), dtype=bool)
    for name, value in filters.items():
        ok &= np.array([d.metadata.get(name) == value for d in documents], dtype=bool)
    return ok[chunks.doc]
