"""Retrieval stages: BM25, dense (FAISS), fusion, reranking; each returns a StageResult."""

from sweep.retrieval.bm25 import bm25_search
from sweep.retrieval.dense import Encoder
from sweep.retrieval.faiss_index import dense_search
from sweep.retrieval.fusion import fuse
from sweep.retrieval.rerank import Reranker
from sweep.retrieval.results import StageResult, top_k

__all__ = ["Encoder", "Reranker", "StageResult", "bm25_search", "dense_search", "fuse", "top_k"]
