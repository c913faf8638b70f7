"""Retrieval stages: BM25, dense (FAISS), fusion, reranking; each returns a StageResult."""

from sweep.retrieval.bm25 import BM25Index
from sweep.retrieval.dense import Encoder
from sweep.retrieval.faiss_index import DenseIndex
from sweep.retrieval.fusion import fuse
from sweep.retrieval.rerank import Reranker
from sweep.retrieval.results import StageResult, top_k

__all__ = ["BM25Index", "DenseIndex", "Encoder", "Reranker", "StageResult", "fuse", "top_k"]
