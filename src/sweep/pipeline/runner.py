"""One configuration end to end: data → chunks → labels → stages → metrics.

Every stage's output is cached by a key naming exactly what it depends on,
in memory (a sweep re-uses it within a process) and on disk (across runs and
workers). A trial that only changes fusion, k or the reranker toggle re-uses
the first-stage results and costs milliseconds plus metric time.
"""

from __future__ import annotations

import time
from collections import defaultdict
from functools import partial
from pathlib import Path

import numpy as np
from cachetools import LRUCache

from sweep.cache import StageCache, array_bytes, content_key, keep_in_memory
from sweep.chunking import ChunkingConfig
from sweep.config.schema import BM25Config, DenseConfig, EvalConfig
from sweep.data import EvalSet
from sweep.data.select import load_dataset
from sweep.errors import ConfigError
from sweep.models import model_identity
from sweep.pipeline.prepare import Prepared, build_prepared, trial_warnings
from sweep.pipeline.result import EvalResult
from sweep.pipeline.scoring import score_ranking
from sweep.retrieval import Encoder, Reranker, StageResult, fuse
from sweep.retrieval.bm25 import Analyzer, BM25Index, TermCounts
from sweep.retrieval.dense import truncated_share
from sweep.retrieval.expand import expand_to_parents
from sweep.retrieval.faiss_index import DenseIndex, index_setting
from sweep.retrieval.query import llm_queries, rocchio, rrf_by_owner, stage_queries
from sweep.retrieval.results import timed

PREPARED_KEPT = 3  # chunkings whose prepared data stay in memory
ARRAYS_KEPT_BYTES = 1 << 30  # stage results, and term counts, each kept up to 1 GiB


class Pipeline:
    """Runs configurations, keeping prepared data, encoders and stage outputs between runs."""

    def __init__(
        self, cache_dir: str | Path, lenient: bool = False, progress: bool = True, serving: bool = False
    ):
        self.cache_dir = str(cache_dir)
        # serving (a Retriever): new questions each call, so no label, stage output or query vector is
        # kept; the BM25 and FAISS indexes are built once and kept (a sweep: outputs and FAISS, see _index)
        self.serving = serving
        self._indexes: dict[tuple, object] = {}
        self._faiss: LRUCache = LRUCache(ARRAYS_KEPT_BYTES, getsizeof=lambda index: 2 * index.vectors.nbytes)
        self.stage_cache = StageCache(cache_dir)
        self.lenient, self.progress = lenient, progress
        self.label = ""  # what the progress bars are for, e.g. "trial 7" in a sweep
        # bounded, least recently used first out, so a long sweep's memory stays flat: a chunking's
        # prepared set (chunks, texts, labels) is rebuilt when it returns, stage results come from disk
        self._prepared: LRUCache[str, Prepared] = LRUCache(PREPARED_KEPT)
        self._subsets: LRUCache[tuple, Prepared] = LRUCache(4 * PREPARED_KEPT)
        self._datasets: dict[str, EvalSet] = {}
        self._stages: LRUCache[str, StageResult] = LRUCache(ARRAYS_KEPT_BYTES, getsizeof=array_bytes)
        self._encoders: dict[str, Encoder] = {}
        self._kept_arrays: LRUCache = LRUCache(ARRAYS_KEPT_BYTES, getsizeof=array_bytes)  # BM25 term counts
        self._rerankers: dict[str, Reranker] = {}
        self.counters: dict[str, int] = defaultdict(int)
        self._cost: dict[str, float] = {}

    # -- data ------------------------------------------------------------------
    def prepare(self, config: EvalConfig) -> Prepared:
        ds_key = config.dataset.model_dump_json()
        chunking = ChunkingConfig(**config.chunking.model_dump())
        expand = config.retrieval.expand.model_dump_json()
        key = content_key(ds_key, chunking.key(), config.evaluation.hit_min_overlap, expand)
        if key in self._prepared:
            return self._prepared[key]
        if ds_key not in self._datasets:
            try:
                self._datasets[ds_key] = load_dataset(config.dataset, self.lenient, scorable=not self.serving)
            except ConfigError as e:
                raise e.located(config.source) from None
        encoder = self.encoder(DenseConfig(model=chunking.model), config)  # the semantic chunker's sentences
        embed = partial(encoder.encode, progress="embedding sentences" if self.progress else None, bulk=True)
        dataset, labelled = self._datasets[ds_key], not self.serving  # serving: the users' questions
        self._prepared[key] = build_prepared(dataset, config, chunking, key, embed, labelled)
        return self._prepared[key]

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
                result = compute()  # its compute_seconds set by the stage's search (timed)
                self.stage_cache.put(key, result.arrays())
            keep_in_memory(self._stages, key, result)
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t
        self._cost[name] = result.compute_seconds
        return result

    def encoder(self, dense: DenseConfig, config: EvalConfig) -> Encoder:
        """The one encoder (and vector cache) for these dense and encode settings, made on first use."""
        k = dense.model_dump_json() + config.encode.model_dump_json()
        if k not in self._encoders:
            self._encoders[k] = Encoder(dense, self.cache_dir, config.encode)
        return self._encoders[k]

    def _inputs_key(self, p: Prepared) -> str:
        """What every first stage depends on besides its own settings; hashed once per prepared set."""
        if p.inputs_key is None:
            filters = None if p.allowed is None else p.allowed.key()
            p.texts_key = content_key(*p.index_texts)
            p.inputs_key = content_key(p.texts_key, content_key(*p.queries), filters)
        return p.inputs_key

    def _kept(self, key: str, compute) -> dict[str, np.ndarray]:
        """Arrays computed once per key: in memory for this process, in the stage cache for every other."""
        found = self._kept_arrays.get(key)
        if found is None:
            found = self.stage_cache.get(key)
            if found is None:
                found = compute()
                self.stage_cache.put(key, found)
            keep_in_memory(self._kept_arrays, key, found)
        return found

    def _term_counts(self, p: Prepared, c: BM25Config) -> TermCounts:
        """The chunks' BM25 term counts per analyser (a new k1 or b only reweights them)."""
        self._inputs_key(p)
        key = content_key("bm25-terms", p.texts_key, c.lowercase, c.stopwords, c.stemming)
        return TermCounts.from_arrays(self._kept(key, lambda: Analyzer(c).counts(p.index_texts).arrays()))

    def _stage(
        self, name: str, p: Prepared, config: EvalConfig, timings: dict, params, search
    ) -> StageResult:
        """A first stage over the (possibly expanded) queries; several queries per question fused by RRF."""
        queries, owner, allowed = stage_queries(
            p.queries, p.rewrites, p.allowed, config.retrieval.query, self.cache_dir, not self.serving
        )
        q, n = config.retrieval.query, config.retrieval.candidates

        def compute() -> StageResult:
            result = search(queries, allowed)  # its compute_seconds: the queries' time, not the index build
            if owner is None:
                return result
            fused = rrf_by_owner(result, owner, len(p.queries), q.rrf_k, n, len(p.chunks))
            fused.compute_seconds = result.compute_seconds
            return fused

        if self.serving:
            t, result = time.perf_counter(), compute()
            timings[name] = time.perf_counter() - t
            self._cost[name] = result.compute_seconds
            return result
        extra = content_key(*queries) if owner is not None else None
        key = content_key(name, self._inputs_key(p), params, n, extra, q.rrf_k if owner is not None else None)
        return self._cached(key, compute, timings, name)

    def _index(self, key: tuple, build):
        """Kept when serving; in a sweep FAISS's only (one build per setting), BM25's being a reweighting."""
        kept = self._indexes if self.serving else self._faiss if key[0] == "dense" else None
        if kept is None:
            return build()
        if key not in kept:
            kept[key] = build()
        return kept[key]

    def bm25(self, p: Prepared, config: EvalConfig, timings: dict) -> StageResult:
        c, n, q = config.retrieval.bm25, config.retrieval.candidates, config.retrieval.query
        rm3 = q.rm3 if q.transform == "rm3" else None
        params = (c.model_dump(exclude={"backend"}), rm3 and rm3.model_dump())  # both backends score alike

        def search(queries: list[str], allowed) -> StageResult:
            build = lambda: BM25Index(p.index_texts, c, rm3, lambda texts: self._term_counts(p, c))  # noqa: E731
            index = self._index(("bm25", p.key, repr(params)), build)
            return timed(index.search, queries, n, allowed)

        return self._stage("bm25", p, config, timings, params, search)

    def dense(self, p: Prepared, config: EvalConfig, timings: dict) -> StageResult:
        c, n, q = config.retrieval.dense, config.retrieval.candidates, config.retrieval.query
        prf = q.prf if q.transform == "dense_prf" else None
        hyde = q.llm if q.transform == "hyde" else None  # an LLM's answer passage in the question's place
        prompt = hyde and hyde.model_dump(include={"url", "model", "prompt"})
        encoder = self.encoder(c, config)  # the model itself loads only when a text must be encoded
        params = (
            c.model_dump(exclude={"batch_size", "model", "device", "precision"}),
            model_identity(c.model),
            prf and prf.model_dump(),
            prompt,
        ) + (() if encoder.precision == "float32" else (encoder.precision,))  # half-precision vectors differ

        def index() -> DenseIndex:
            what = f"{self.label}: " * bool(self.label) + f"embedding chunks with {c.model}"
            what = what if self.progress else None
            return DenseIndex(encoder.encode(p.index_texts, c.document_prefix, what, bulk=True), c).build()

        def answer(found: DenseIndex, queries: list[str], allowed) -> StageResult:
            if hyde is not None:
                queries = [h[0] for h in llm_queries(hyde, "hyde", queries, self.cache_dir, not self.serving)]
            vectors = encoder.encode(queries, c.query_prefix, keep=not self.serving)
            first = found.search(vectors, n, allowed)
            if prf is None:
                return first
            return found.search(rocchio(vectors, found.vectors, first.ids, prf, c.normalize), n, allowed)

        built = ("dense", p.key, index_setting(c), params[1], encoder.precision)

        def search(queries: list[str], allowed) -> StageResult:
            found = self._index(built, index).using(c)  # efSearch / nprobe: no new build
            return timed(answer, found, queries, allowed)

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
                self._rerankers[k] = Reranker(r.rerank, self.cache_dir, keep=not self.serving)
            reranker = self._rerankers[k]
            reranker.label = self.label
            before = reranker.scored
            first = reranker.rerank(p.queries, p.index_texts, first)
            self.counters["rerank_pairs_scored"] += reranker.scored - before
            timings["rerank"] = self._cost["rerank"] = time.perf_counter() - t
        if p.parents is not None:  # small-to-big: what is served, and scored, is each hit's parent
            first = expand_to_parents(first, p.parents.of)
        return first  # the whole ranking: run() cuts it at top_k, the recall curve reads all of it

    # -- the whole thing ---------------------------------------------------------
    def n_questions(self, config: EvalConfig) -> int:
        return self.prepare(config).labels.n_questions

    def run(
        self, config: EvalConfig, extra_metrics: list[str] = (), rows: np.ndarray | None = None
    ) -> EvalResult:
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
        chunks = p.served[0]  # small-to-big scores the parents it serves
        chunk_scores, doc_scores, curve = score_ranking(p, config, deep, run, extra_metrics)
        timings["metrics"] = time.perf_counter() - t
        counters = {k: v - before.get(k, 0) for k, v in self._totals().items()}
        scores = doc_scores if config.evaluation.view == "document" else chunk_scores
        latency_ms = 1000 * sum(self._cost.values()) / max(1, len(p.queries))
        share = self.truncation(p, config) if config.retrieval.mode != "bm25" else None
        return EvalResult(
            config,
            scores,
            chunk_scores,
            doc_scores,
            run,
            curve,
            timings,
            counters,
            latency_ms,
            share,
            trial_warnings(p, config, share),
            list(p.eval_set.dropped),
            chunks,
            [d.id for d in p.eval_set.documents],
            p.has_spans,
        )

    def _totals(self) -> dict[str, int]:
        encoders = list(self._encoders.values())
        return dict(self.counters) | {
            "texts_encoded": sum(e.stats.encoded for e in encoders),
            "texts_from_cache": sum(e.stats.cached for e in encoders),
            "encode_ms": round(1000 * sum(e.stats.seconds for e in encoders)),
        }

    def truncation(self, p: Prepared, config: EvalConfig) -> float:
        """Share of chunks the dense model truncates, counted once per chunk set and model (cached)."""
        c = config.retrieval.dense
        self._inputs_key(p)
        reads = (model_identity(c.model), c.max_seq_length, c.document_prefix)  # what truncation depends on
        key = content_key("truncated", p.texts_key, *reads)
        found = self._kept(key, lambda: {"share": np.array([truncated_share(p.index_texts, c)])})
        return float(found["share"][0])


def _model_key(error: ConfigError, config: EvalConfig) -> str:
    if error.key != "model":
        return error.key
    r = config.retrieval
    named = [
        ("retrieval.dense.model", r.dense.model, r.mode != "bm25"),
        ("retrieval.rerank.model", r.rerank.model, r.rerank.enabled),
    ]
    return next((key for key, name, used in named if used and repr(name) in error.message), error.key)
