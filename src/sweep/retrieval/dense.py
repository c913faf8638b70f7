"""Dense retrieval: sentence-transformers encoders, an embedding cache, FAISS search.

Embeddings are cached per (model identity, settings, text hash) in a
:class:`RowStore`, so a text encoded once with a model is never encoded
again in any run or process; only the missing texts go to the model.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from sweep.cache import RowStore, content_key, text_key
from sweep.config.schema import DenseConfig
from sweep.models import check_hub_model, describe_load_failure, model_identity, resolve_device, resolve_model
from sweep.retrieval.results import StageResult, top_k

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def load_sentence_transformer(
    name: str, max_seq_length: int | None = None, device: str = "cpu", precision: str = "float32"
):
    """One obvious way to load a model: folder, packaged alias, or hub name; on a resolved device and float type."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars say nothing a user needs
    resolved = resolve_model(name)
    if resolved == name and not Path(name).expanduser().exists():
        check_hub_model(name)  # seconds, not a minute and a half of download retries
    try:
        model = SentenceTransformer(resolved, device=device)
    except Exception as e:  # noqa: BLE001 - any loading failure becomes a config error naming the model
        raise describe_load_failure(name, e) from e
    if precision != "float32":
        model.to(getattr(torch, precision))
    if max_seq_length:
        model.max_seq_length = max_seq_length
    return model


@dataclass
class EncodeStats:
    encoded: int = 0
    cached: int = 0
    seconds: float = 0.0


@dataclass
class Encoder:
    """Encodes texts through the cache; ``stats`` counts what really went to the model.

    Several processes encoding the same texts share the work shard by shard (:class:`RowStore`):
    each text goes to a model once, and a process whose shards another holds shows them landing.
    """

    config: DenseConfig
    cache_dir: str
    stats: EncodeStats = field(default_factory=EncodeStats)

    @cached_property
    def resolved(self) -> tuple[str, str]:
        """(device, precision); resolved on first use, so a BM25-only run never imports torch."""
        return resolve_device(self.config.device, self.config.precision)

    @property
    def device(self) -> str:
        return self.resolved[0]

    @property
    def precision(self) -> str:
        return self.resolved[1]

    @cached_property
    def store(self) -> RowStore:
        half = () if self.precision == "float32" else (self.precision,)  # float32 keeps the caches it made
        namespace = content_key(
            "embeddings",
            model_identity(self.config.model),
            self.config.normalize,
            self.config.max_seq_length,
            *half,
        )
        return RowStore(self.cache_dir, namespace)

    def model(self):
        return load_sentence_transformer(
            self.config.model, self.config.max_seq_length, self.device, self.precision
        )

    def encode(self, texts: list[str], prefix: str = "", progress: str | None = None) -> np.ndarray:
        full = [prefix + t for t in texts]
        keys = [text_key(t) for t in full]
        unique: dict[bytes, str] = dict(zip(keys, full))
        # a bar update every few batches; the model still sees whole batches
        step = self.config.batch_size * 8

        def bar(total: int):
            return tqdm(
                total=total,
                desc=progress,
                unit="text",
                disable=progress is None or total <= step,
                leave=False,
                dynamic_ncols=True,
            )

        t, before = time.perf_counter(), self.stats.encoded
        vectors, encoded = self.store.fetch_or_compute(
            list(unique), lambda ks, b: self._encode([unique[k] for k in ks], b, step), bar
        )
        self.stats.cached += len(unique) - encoded
        if progress is not None and encoded > step:
            seconds = time.perf_counter() - t
            log.info(
                "%s: %d texts in %.1fs (%.0f texts/s on %s)",
                progress,
                self.stats.encoded - before,
                seconds,
                (self.stats.encoded - before) / max(seconds, 1e-9),
                self.device,
            )
        return np.stack([vectors[k] for k in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

    def _encode(self, texts: list[str], bar, step: int) -> np.ndarray:
        """The model's embeddings of ``texts``, ``step`` at a time onto ``bar``."""
        model = self.model()
        t = time.perf_counter()
        parts = []
        for start in range(0, len(texts), step):
            batch = texts[start : start + step]
            parts.append(
                model.encode(
                    batch,
                    batch_size=self.config.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=self.config.normalize,
                    show_progress_bar=False,
                )
            )
            bar.update(len(batch))
        new = np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 0), dtype=np.float32)
        self.stats.seconds += time.perf_counter() - t
        self.stats.encoded += len(texts)
        return new


def truncated_share(texts: list[str], config: DenseConfig) -> float:
    """The share of ``texts`` (with the document prefix) longer than the model's ``max_seq_length`` in tokens.

    The encoder silently cuts them: a chunk-size sweep with dense retrieval then compares chunks the
    model never read to the end.

    Args:
        texts: the indexed texts.
        config: the dense settings (model, prefix, max_seq_length).

    Returns:
        A share in [0, 1].

    Example:
        >>> truncated_share(["a short text"], DenseConfig(model="minilm-l6"))  # doctest: +SKIP
        0.0
    """
    if not texts:
        return 0.0
    model = load_sentence_transformer(
        config.model, config.max_seq_length, *resolve_device(config.device, config.precision)
    )
    limit = model.max_seq_length
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not limit:
        return 0.0
    lengths = [
        len(ids)
        for ids in tokenizer(
            [config.document_prefix + t for t in texts],
            add_special_tokens=True,
            truncation=False,
            verbose=False,
        )["input_ids"]
    ]
    return float(np.mean(np.asarray(lengths) > limit))


def build_index(vectors: np.ndarray, config: DenseConfig):
    import faiss

    dim = vectors.shape[1]
    if config.index == "hnsw":
        index = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.hnsw_ef_construction
        index.hnsw.efSearch = config.hnsw_ef_search
    elif config.index == "ivf":
        lists = max(1, min(config.ivf_lists, len(vectors) // 39))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, lists, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.nprobe = min(config.ivf_probe, lists)
    else:
        index = faiss.IndexFlatIP(dim)
    index.add(vectors)
    return index


class DenseIndex:
    """Chunk vectors in a FAISS index, built once; ``search`` any number of query batches against it.

    Args:
        doc_vectors: ``(chunks, dim)`` float32 embeddings.
        config: the index kind (flat, HNSW, IVF) and its parameters.

    Example:
        >>> index = DenseIndex(np.eye(2, dtype=np.float32), DenseConfig())
        >>> index.search(np.array([[0.0, 1.0]], dtype=np.float32), depth=1).ids.tolist()
        [[1]]
    """

    def __init__(self, doc_vectors: np.ndarray, config: DenseConfig):
        self.vectors, self.config = doc_vectors, config
        self._index = None  # built on the first unfiltered query: filtered ones are scored exactly

    def build(self) -> "DenseIndex":
        """Build the FAISS index now (a query's latency should not include it); returns itself."""
        if self._index is None:
            self._index = build_index(self.vectors, self.config)
        return self

    def search(self, query_vectors: np.ndarray, depth: int, allowed: np.ndarray | None = None) -> StageResult:
        """Inner-product search (cosine when normalised). Filtered questions are scored exactly."""
        n_q = len(query_vectors)
        ids = np.full((n_q, depth), -1, dtype=np.int64)
        scores = np.full((n_q, depth), -np.inf, dtype=np.float32)
        filtered = np.zeros(n_q, dtype=bool) if allowed is None else ~allowed.all(axis=1)
        plain = np.flatnonzero(~filtered)
        if len(plain):
            self.build()
            k = min(depth, len(self.vectors))
            s, i = self._index.search(np.ascontiguousarray(query_vectors[plain]), k)
            # FAISS breaks ties arbitrarily; re-sort so ties keep the lower chunk index
            order = np.lexsort((i, -s), axis=1)
            i, s = np.take_along_axis(i, order, 1), np.take_along_axis(s, order, 1)
            s[i < 0] = -np.inf
            ids[plain, :k], scores[plain, :k] = i, s
        if filtered.any():
            rows = np.flatnonzero(filtered)
            exact = top_k(query_vectors[rows] @ self.vectors.T, depth, allowed[rows])
            ids[rows], scores[rows] = exact.ids, exact.scores
        return StageResult(ids, scores)


def dense_search(
    doc_vectors: np.ndarray,
    query_vectors: np.ndarray,
    config: DenseConfig,
    depth: int,
    allowed: np.ndarray | None,
) -> StageResult:
    """Inner-product search of one batch of queries (an index built for it alone)."""
    return DenseIndex(doc_vectors, config).search(query_vectors, depth, allowed)
