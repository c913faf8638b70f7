"""One configuration end to end: data → chunks → labels → stages → metrics.

Every stage's output is cached by a key naming exactly what it depends on,
in memory (a sweep re-uses it within a process) and on disk (across runs and
workers). A trial that only changes fusion, k or the reranker toggle re-uses
the first-stage results and costs milliseconds plus metric time.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .cache import StageCache, content_key
from .chunking import ChunkingConfig, ChunkSet, chunk_corpus
from .config import DatasetConfig, EvalConfig
from .data import EvalSet, load_beir, load_native, load_span_csv
from .data.validate import merge_overlapping_evidence
from .diagnostics import recall_curve
from .errors import ConfigError
from .holdout import partition
from .labels import HitRule, Labels, resolve_labels
from .metrics import evaluate, span_metrics, standard_metrics
from .models import model_identity
from .result import EvalResult, document_run
from .retrieval import Encoder, Reranker, StageResult, fuse
from .retrieval.bm25 import BM25Index
from .retrieval.dense import DenseIndex, truncated_share
from .retrieval.query import expand, plugin_queries, rocchio, rrf_by_owner

TRUNCATION_WARN = 0.05  # a share of truncated chunks worth a warning


def load_dataset(config: DatasetConfig, lenient: bool = False) -> EvalSet:
    if config.loader == "python_reference":
        from .data.python_reference import load_python_reference

        eval_set = load_python_reference(None if config.path == "bundled" else config.path)
    else:
        path = Path(config.path)
        if not path.exists():
            raise ConfigError("", "dataset.path", f"{path} does not exist", ["point dataset.path at your eval set"])
        if config.loader == "beir":
            eval_set = load_beir(path, config.split or "test", lenient=lenient)
        elif config.loader == "span_csv":
            eval_set = load_span_csv(path, config.corpora, lenient=lenient)
        else:
            eval_set = load_native(path, lenient=lenient)
    if config.split and config.loader in ("native", "python_reference"):  # BEIR's split picks its qrels file
        eval_set = eval_set.with_questions([q for q in eval_set.questions if q.split == config.split])
    if config.max_questions:
        eval_set = eval_set.with_questions(eval_set.questions[: config.max_questions])
    if config.holdout:
        eval_set = eval_set.with_questions(partition(eval_set.questions, config.holdout))
    if config.merge_overlapping_evidence:
        eval_set = merge_overlapping_evidence(eval_set)
    if not eval_set.answerable(config.relevance_threshold)[0]:
        raise ConfigError("", "dataset", f"none of the {len(eval_set.questions)} selected questions has evidence of "
                          f"grade >= {config.relevance_threshold} (dataset.relevance_threshold), so nothing can be "
                          "scored", ["add evidence to the questions, or check dataset.split and the threshold"])  # fmt: skip
    return eval_set


@dataclass
class Prepared:
    """What every trial with the same data and chunking shares."""

    eval_set: EvalSet
    chunks: ChunkSet
    index_texts: list[str]  # what retrievers see: chunk text, title-prefixed if configured
    labels: Labels
    doc_labels: Labels
    queries: list[str]  # answerable questions, in label order
    allowed: np.ndarray | None  # (questions, chunks) metadata-filter mask, None when no filters
    has_spans: bool
    key: str
    inputs_key: str | None = None
    rewrites: list[list[str]] = field(default_factory=list)  # per answerable question, for multi_query

    def subset(self, rows: np.ndarray) -> "Prepared":
        """The same chunks with only questions ``rows`` (sorted label indices): one batch of a pruned trial."""
        rows = np.asarray(rows, dtype=np.int64)
        return Prepared(self.eval_set, self.chunks, self.index_texts, self.labels.subset(rows),
                        self.doc_labels.subset(rows), [self.queries[i] for i in rows],
                        None if self.allowed is None else self.allowed[rows], self.has_spans,
                        content_key(self.key, rows.tobytes()), None, [self.rewrites[i] for i in rows])  # fmt: skip


class Pipeline:
    """Runs configurations, keeping prepared data, encoders and stage outputs between runs."""

    def __init__(self, cache_dir: str | Path, lenient: bool = False, progress: bool = True, serving: bool = False):
        self.cache_dir = str(cache_dir)
        # serving (a Retriever): every call brings new queries, so stage outputs are not cached, while the
        # BM25 and FAISS indexes are built once and kept (a sweep keeps outputs and rebuilds indexes instead)
        self.serving = serving
        self._indexes: dict[tuple, object] = {}
        self.stage_cache = StageCache(cache_dir)
        self.lenient = lenient
        self.progress = progress
        self.label = ""  # what the progress bars are for, e.g. "trial 7" in a sweep
        self._prepared: dict[str, Prepared] = {}
        self._subsets: dict[tuple, Prepared] = {}
        self._datasets: dict[str, EvalSet] = {}
        self._stages: dict[str, StageResult] = {}
        self._encoders: dict[str, Encoder] = {}
        self._rerankers: dict[str, Reranker] = {}
        self.counters: dict[str, int] = defaultdict(int)
        self._cost: dict[str, float] = {}
        self._truncation: dict[str, float] = {}

    # -- data ------------------------------------------------------------------
    def prepare(self, config: EvalConfig) -> Prepared:
        ds_key = config.dataset.model_dump_json()
        chunking = ChunkingConfig(**config.chunking.model_dump())
        key = content_key(ds_key, chunking.key(), config.evaluation.hit_min_overlap)
        if key in self._prepared:
            return self._prepared[key]
        if ds_key not in self._datasets:
            try:
                self._datasets[ds_key] = load_dataset(config.dataset, self.lenient)
            except ConfigError as e:
                raise e.located(config.source) from None
        eval_set = self._datasets[ds_key]
        chunks = chunk_corpus(eval_set, chunking)
        docs = eval_set.documents
        if config.dataset.include_title:
            index_texts = [f"{docs[d].title} {t}" if docs[d].title else t for d, t in zip(chunks.doc, chunks.texts)]
        else:
            index_texts = list(chunks.texts)
        threshold = config.dataset.relevance_threshold
        rule = HitRule(config.evaluation.hit_min_overlap)
        labels = resolve_labels(eval_set, chunks, rule, threshold)
        whole = chunk_corpus(eval_set, ChunkingConfig("document"))
        doc_labels = resolve_labels(eval_set, whole, rule, threshold)
        answerable, _ = eval_set.answerable(threshold)
        allowed = None
        if any(q.filters for q in answerable):
            allowed = np.ones((len(answerable), len(chunks)), dtype=bool)
            for i, q in enumerate(answerable):
                for k, v in q.filters.items():
                    ok = np.array([docs[d].metadata.get(k) == v for d in range(len(docs))], dtype=bool)
                    allowed[i] &= ok[chunks.doc]
        has_spans = any(e.start is not None for q in answerable for e in q.evidence)
        prepared = Prepared(eval_set, chunks, index_texts, labels, doc_labels, [q.text for q in answerable],
                            allowed, has_spans, key, None, [list(q.metadata.get("rewrites", [])) for q in answerable])  # fmt: skip
        self._prepared[key] = prepared
        return prepared

    # -- stages ----------------------------------------------------------------
    def _cached(self, key: str, compute, timings: dict, name: str) -> StageResult:
        t = time.perf_counter()
        if key in self._stages:
            self.counters[f"{name}_memory_hits"] += 1
            result = self._stages[key]
        else:
            arrays = self.stage_cache.get(key)
            if arrays is not None:
                self.counters[f"{name}_disk_hits"] += 1
                result = StageResult.from_arrays(arrays)
            else:
                self.counters[f"{name}_computed"] += 1
                result = compute()
                result.compute_seconds = time.perf_counter() - t
                self.stage_cache.put(key, result.arrays())
            self._stages[key] = result
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t
        self._cost[name] = result.compute_seconds
        return result

    def _encoder(self, config) -> Encoder:
        k = config.model_dump_json()
        if k not in self._encoders:
            self._encoders[k] = Encoder(config, self.cache_dir)
        return self._encoders[k]

    def _inputs_key(self, p: Prepared) -> str:
        """What every first stage depends on besides its own settings; hashed once per prepared set."""
        if p.inputs_key is None:
            filters = None if p.allowed is None else content_key(np.packbits(p.allowed).tobytes())
            p.inputs_key = content_key(content_key(*p.index_texts), content_key(*p.queries), filters)
        return p.inputs_key

    def _queries(self, p: Prepared, config: EvalConfig) -> tuple[list[str], np.ndarray | None, np.ndarray | None]:
        """(queries, their question, filter mask) for the first stages: several per question for
        multi_query (the question and its rewrites) and plugin (the plugin's queries)."""
        q = config.retrieval.query
        if q.transform not in ("multi_query", "plugin"):
            return p.queries, None, p.allowed
        if q.transform == "multi_query":
            lists = [[text, *rewrites] for text, rewrites in zip(p.queries, p.rewrites)]
        else:
            lists = plugin_queries(q.plugin, p.queries, self.cache_dir)
        flat, owner = expand(lists)
        return flat, owner, None if p.allowed is None else p.allowed[owner]

    def _stage(self, name: str, p: Prepared, config: EvalConfig, timings: dict, params, search) -> StageResult:
        """A first stage over the (possibly expanded) queries; several queries per question fused by RRF."""
        queries, owner, allowed = self._queries(p, config)
        q, n = config.retrieval.query, config.retrieval.candidates

        def compute() -> StageResult:
            result = search(queries, allowed)
            if owner is None:
                return result
            return rrf_by_owner(result, owner, len(p.queries), q.rrf_k, n, len(p.chunks))

        if self.serving:
            t = time.perf_counter()
            result = compute()
            timings[name] = self._cost[name] = time.perf_counter() - t
            return result
        extra = content_key(*queries) if owner is not None else None
        key = content_key(name, self._inputs_key(p), params, n, extra, q.rrf_k if owner is not None else None)
        return self._cached(key, compute, timings, name)

    def _index(self, key: tuple, build):
        """A BM25 or FAISS index: kept when serving, built for the one search otherwise."""
        if not self.serving:
            return build()
        if key not in self._indexes:
            self._indexes[key] = build()
        return self._indexes[key]

    def bm25(self, p: Prepared, config: EvalConfig, timings: dict) -> StageResult:
        c, n, q = config.retrieval.bm25, config.retrieval.candidates, config.retrieval.query
        rm3 = q.rm3 if q.transform == "rm3" else None
        params = (c.model_dump(exclude={"backend"}), rm3 and rm3.model_dump())  # both backends score alike (tested)

        def search(queries: list[str], allowed) -> StageResult:
            index = self._index(("bm25", p.key, repr(params)), lambda: BM25Index(p.index_texts, c, rm3))
            return index.search(queries, n, allowed)

        return self._stage("bm25", p, config, timings, params, search)

    def dense(self, p: Prepared, config: EvalConfig, timings: dict) -> StageResult:
        c, n, q = config.retrieval.dense, config.retrieval.candidates, config.retrieval.query
        prf = q.prf if q.transform == "dense_prf" else None
        params = (c.model_dump(exclude={"batch_size", "model"}), model_identity(c.model), prf and prf.model_dump())
        encoder = self._encoder(c)  # the model itself loads only when a text must be encoded

        def index() -> DenseIndex:
            what = f"embedding chunks with {c.model}"
            label = f"{self.label}: {what}" if self.label else what
            docs = encoder.encode(p.index_texts, c.document_prefix, progress=label if self.progress else None)
            return DenseIndex(docs, c)

        def search(queries: list[str], allowed) -> StageResult:
            found = self._index(("dense", p.key, repr(params[:2])), index)
            vectors = encoder.encode(queries, c.query_prefix)
            first = found.search(vectors, n, allowed)
            if prf is None:
                return first
            return found.search(rocchio(vectors, found.vectors, first.ids, prf, c.normalize), n, allowed)

        return self._stage("dense", p, config, timings, params, search)

    def retrieve(self, p: Prepared, config: EvalConfig, timings: dict) -> StageResult:
        r = config.retrieval
        if r.mode == "bm25":
            first = self.bm25(p, config, timings)
        elif r.mode == "dense":
            first = self.dense(p, config, timings)
        else:
            lexical, dense = self.bm25(p, config, timings), self.dense(p, config, timings)
            t = time.perf_counter()
            depth = max(r.top_k, r.candidates, r.rerank.depth if r.rerank.enabled else 0)
            first = fuse(lexical, dense, r.fusion, depth, len(p.chunks))
            timings["fusion"] = self._cost["fusion"] = time.perf_counter() - t
        if r.rerank.enabled:
            t = time.perf_counter()
            k = r.rerank.model_dump_json()
            if k not in self._rerankers:
                self._rerankers[k] = Reranker(r.rerank, self.cache_dir)
            reranker = self._rerankers[k]
            reranker.label = self.label
            before = reranker.scored
            first = reranker.rerank(p.queries, p.index_texts, first)
            self.counters["rerank_pairs_scored"] += reranker.scored - before
            timings["rerank"] = self._cost["rerank"] = time.perf_counter() - t
        return first  # the whole ranking: run() cuts it at top_k, the recall curve reads all of it

    # -- the whole thing ---------------------------------------------------------
    def n_questions(self, config: EvalConfig) -> int:
        return self.prepare(config).labels.n_questions

    def run(self, config: EvalConfig, extra_metrics: list[str] = (), rows: np.ndarray | None = None) -> EvalResult:
        """Evaluate ``config`` at its cutoffs up to top_k, plus ``extra_metrics`` (a sweep's objective).

        ``rows`` restricts it to those answerable questions (sorted indices), for pruning by batches.
        """
        try:
            return self._run(config, extra_metrics, rows)
        except ConfigError as e:  # name the file, and the full key of a model that failed to load
            raise e.located(config.source, _model_key(e, config)) from None

    def _run(self, config: EvalConfig, extra_metrics, rows) -> EvalResult:
        timings: dict[str, float] = {}
        self._cost: dict[str, float] = {}
        before = self._totals()  # counters are per run: what this configuration cost, not the process so far
        t = time.perf_counter()
        p = self.prepare(config)
        if rows is not None:
            key = (p.key, np.asarray(rows, dtype=np.int64).tobytes())
            if key not in self._subsets:
                self._subsets[key] = p.subset(rows)
            p = self._subsets[key]
        timings["prepare"] = time.perf_counter() - t
        deep = self.retrieve(p, config, timings)
        run = deep.head(config.retrieval.top_k)
        t = time.perf_counter()
        ks = tuple(k for k in config.evaluation.ks if k <= config.retrieval.top_k) or (config.retrieval.top_k,)
        names = standard_metrics(ks)
        names += [m for m in extra_metrics if m not in names]
        chunk_scores = evaluate(run.ids, p.labels, names)
        if p.has_spans:
            for n in config.evaluation.span_metrics_at:
                chunk_scores.values.update(span_metrics(run.ids, p.labels, p.chunks, n))
        doc_run = document_run(run.ids, p.chunks.doc, len(p.eval_set.documents))
        doc_scores = evaluate(doc_run, p.doc_labels, names)
        texts = dict(zip(p.labels.question_ids, p.queries))
        for s in (chunk_scores, doc_scores):
            s.texts = texts
        if config.evaluation.view == "document":
            curve = recall_curve(document_run(deep.ids, p.chunks.doc, len(p.eval_set.documents)), p.doc_labels)
        else:
            curve = recall_curve(deep.ids, p.labels)
        timings["metrics"] = time.perf_counter() - t
        counters = {k: v - before.get(k, 0) for k, v in self._totals().items()}
        scores = doc_scores if config.evaluation.view == "document" else chunk_scores
        latency_ms = 1000 * sum(self._cost.values()) / max(1, len(p.queries))
        share = self.truncation(p, config) if config.retrieval.mode != "bm25" else None
        return EvalResult(config, scores, chunk_scores, doc_scores, run, curve, timings, counters, latency_ms, share,
                          self._warnings(p, config, share), list(p.eval_set.dropped), p.chunks,
                          [d.id for d in p.eval_set.documents], p.has_spans)  # fmt: skip

    def _totals(self) -> dict[str, int]:
        encoders = list(self._encoders.values())
        return dict(self.counters) | {"texts_encoded": sum(e.stats.encoded for e in encoders),
                                      "texts_from_cache": sum(e.stats.cached for e in encoders)}  # fmt: skip

    def truncation(self, p: Prepared, config: EvalConfig) -> float:
        """Share of chunks the dense model truncates, counted once per chunk set and model (cached)."""
        c = config.retrieval.dense
        key = content_key("truncated", content_key(*p.index_texts), model_identity(c.model), c.max_seq_length,
                          c.document_prefix)  # fmt: skip
        if key not in self._truncation:
            found = self.stage_cache.get(key)
            if found is None:
                found = {"share": np.array([truncated_share(p.index_texts, c)])}
                self.stage_cache.put(key, found)
            self._truncation[key] = float(found["share"][0])
        return self._truncation[key]

    @staticmethod
    def _warnings(p: Prepared, config: EvalConfig, share: float | None) -> list[str]:
        out = []
        if share is not None and share >= TRUNCATION_WARN:
            c, k = config.retrieval.dense, config.chunking
            chunks = "whole documents" if k.strategy == "document" else f"{k.strategy}, size {k.size} {k.unit}"
            out.append(f"{share:.0%} of the chunks ({chunks}) are longer "
                       f"than {c.model}'s max_seq_length and are truncated when embedded: dense scores ignore their "
                       "ends; use smaller chunks or raise retrieval.dense.max_seq_length")  # fmt: skip
        if p.eval_set.merged_evidence:
            out.append(f"{p.eval_set.merged_evidence} overlapping evidence span(s) were merged into one item each "
                       "(dataset.merge_overlapping_evidence: false keeps them apart)")  # fmt: skip
        return out


def _model_key(error: ConfigError, config: EvalConfig) -> str:
    if error.key != "model":
        return error.key
    r = config.retrieval
    named = [("retrieval.dense.model", r.dense.model, r.mode != "bm25"), ("retrieval.rerank.model", r.rerank.model, r.rerank.enabled)]
    return next((key for key, name, used in named if used and repr(name) in error.message), error.key)


def evaluate_config(config: EvalConfig | str | Path, overrides: list[str] = (), lenient: bool = False) -> EvalResult:
    """Evaluate one configuration on its eval set (``sweep eval``), reusing the on-disk caches.

    Args:
        config: a validated :class:`EvalConfig` or a YAML file (its ``search:`` section is ignored).
        overrides: ``key=value`` changes applied to a file, e.g. ``["retrieval.top_k=20"]``.
        lenient: drop invalid eval-set items (listed in ``result.dropped``) instead of failing.

    Returns:
        :class:`EvalResult`: ``.scores`` (the configured view; ``.mean()``, per-question
        ``.values``), chunk and document views, the ranking (``.run``), timings and counters.

    Example:
        >>> result = evaluate_config("configs/hybrid.yaml", ["retrieval.mode=bm25"])
        >>> round(result.scores.mean()["ndcg@10"], 3)
    """
    if not isinstance(config, EvalConfig):
        from .config import load_config

        config = load_config(config, list(overrides))
    return Pipeline(config.cache_dir, lenient=lenient).run(config)
