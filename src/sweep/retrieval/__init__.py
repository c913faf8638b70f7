"""Retrieval stages: BM25, dense (FAISS), fusion, reranking; each returns a StageResult."""

from .bm25 import bm25_search
from .dense import Encoder, dense_search
from .fusion import fuse
from .rerank import Reranker
from .results import StageResult, top_k

__all__ = ["Encoder", "Reranker", "StageResult", "bm25_search", "dense_search", "fuse", "top_k"]
