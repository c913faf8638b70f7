"""rag-sweep: measure and tune retrieval configurations for RAG.

The public surface, in data-flow order; everything else is reachable but
not in the way.
"""

from .chunking import ChunkingConfig, ChunkSet, chunk_corpus
from .data import EvalSet, load_beir, load_native, load_span_csv
from .errors import ConfigError, DataError, SweepError
from .labels import HitRule, Labels, resolve_labels
from .metrics import Scores, evaluate, score_trec, span_metrics

__version__ = "0.1.0"

__all__ = [
    "ChunkSet",
    "ChunkingConfig",
    "ConfigError",
    "DataError",
    "EvalSet",
    "HitRule",
    "Labels",
    "Scores",
    "SweepError",
    "chunk_corpus",
    "evaluate",
    "load_beir",
    "load_native",
    "load_span_csv",
    "resolve_labels",
    "score_trec",
    "span_metrics",
]
