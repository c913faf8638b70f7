"""Dense search: chunk vectors in a FAISS index (flat, HNSW or IVF, their parameters as knobs).

The index is built once per build setting (kind, M, efConstruction, lists) and searched for every
batch of questions; efSearch and nprobe are read by FAISS at each search, so one built index serves
every value a sweep tries (:meth:`DenseIndex.using`). Questions with metadata filters are scored
exactly against the chunks they may see.
"""

from __future__ import annotations

import numpy as np

from sweep.config.schema import DenseConfig
from sweep.retrieval.filters import Filters
from sweep.retrieval.results import SCORE_CELLS, StageResult, top_k

SEARCH_KNOBS = frozenset({"hnsw_ef_search", "ivf_probe"})  # set per search: no rebuild when they change


def index_setting(config: DenseConfig) -> str:
    """What a built index depends on (its vectors and its build), for keeping it: not the search knobs.

    Example:
        >>> index_setting(DenseConfig(hnsw_ef_search=16)) == index_setting(DenseConfig(hnsw_ef_search=99))
        True
    """
    return repr(config.model_dump(exclude={"batch_size", "device", "query_prefix", *SEARCH_KNOBS}))


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

    def using(self, config: DenseConfig) -> "DenseIndex":
        """This index (built or not, shared) searched with ``config``'s efSearch and nprobe.

        Args:
            config: differs from this index's own at most in :data:`SEARCH_KNOBS`.

        Returns:
            A DenseIndex over the same vectors and FAISS index.
        """
        twin = DenseIndex(self.vectors, config)
        twin._index = self.build()._index
        return twin

    def _tune(self) -> None:
        if self.config.index == "hnsw":
            self._index.hnsw.efSearch = self.config.hnsw_ef_search
        elif self.config.index == "ivf":
            self._index.nprobe = min(self.config.ivf_probe, self._index.nlist)

    def search(self, query_vectors: np.ndarray, depth: int, allowed: Filters | None = None) -> StageResult:
        """Inner-product search (cosine when normalised). Filtered questions are scored exactly."""
        n_q = len(query_vectors)
        ids = np.full((n_q, depth), -1, dtype=np.int64)
        scores = np.full((n_q, depth), -np.inf, dtype=np.float32)
        filtered = np.zeros(n_q, dtype=bool) if allowed is None else ~allowed.passes_all()
        plain = np.flatnonzero(~filtered)
        if len(plain):
            self.build()._tune()
            k = min(depth, len(self.vectors))
            s, i = self._index.search(np.ascontiguousarray(query_vectors[plain]), k)
            # FAISS breaks ties arbitrarily; re-sort so ties keep the lower chunk index
            order = np.lexsort((i, -s), axis=1)
            i, s = np.take_along_axis(i, order, 1), np.take_along_axis(s, order, 1)
            s[i < 0] = -np.inf
            ids[plain, :k], scores[plain, :k] = i, s
        if filtered.any():
            filtered_rows = np.flatnonzero(filtered)
            step = max(1, SCORE_CELLS // max(len(self.vectors), 1))  # a batch of (rows, chunks) at a time
            for start in range(0, len(filtered_rows), step):
                rows = filtered_rows[start : start + step]
                exact = top_k(query_vectors[rows] @ self.vectors.T, depth, allowed[rows].dense())
                ids[rows], scores[rows] = exact.ids, exact.scores
        return StageResult(ids, scores)


__all__ = ["SEARCH_KNOBS", "DenseIndex", "build_index", "index_setting"]
