"""rag-sweep: measure and tune retrieval configurations for RAG, and take the winner with you.

The public surface, in data-flow order: load a configuration, evaluate it, sweep it, score any
run, compare two results, and serve the tuned configuration as a retriever. Names that pull in
the heavy libraries (Optuna, MLflow, the models) load on first use, so ``import sweep`` is quick.

    >>> import sweep
    >>> config = sweep.load_config("configs/hybrid.yaml", ["retrieval.mode=bm25"])
    >>> sweep.evaluate_config(config).scores.mean()["ndcg@10"]
    >>> sweep.score({"q1": {"d1": 1}}, {"q1": ["d2", "d1"]}, ["mrr"]).mean()
    {'mrr': 0.5}
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .chunking import ChunkingConfig, ChunkSet, chunk_corpus
from .config import EvalConfig, load_config
from .data import EvalSet, load_beir, load_native, load_span_csv
from .errors import ConfigError, DataError, SweepError
from .labels import HitRule, Labels, resolve_labels
from .metrics import Scores, evaluate, score, span_metrics

__version__ = "0.1.0"

_LAZY = {  # name -> module: these import Optuna, MLflow or the models
    "EvalResult": "result",
    "Pipeline": "pipeline",
    "evaluate_config": "pipeline",
    "Sweep": "study",
    "SweepResult": "finish",
    "run_sweep": "study",
    "compare_scores": "compare",
    "Hit": "retriever",
    "Retriever": "retriever",
}

if TYPE_CHECKING:
    from .compare import compare_scores
    from .finish import SweepResult
    from .pipeline import Pipeline, evaluate_config
    from .result import EvalResult
    from .retriever import Hit, Retriever
    from .study import Sweep, run_sweep


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")


__all__ = [
    "ChunkSet",
    "ChunkingConfig",
    "ConfigError",
    "DataError",
    "EvalConfig",
    "EvalResult",
    "EvalSet",
    "Hit",
    "HitRule",
    "Labels",
    "Pipeline",
    "Retriever",
    "Scores",
    "Sweep",
    "SweepError",
    "SweepResult",
    "chunk_corpus",
    "compare_scores",
    "evaluate",
    "evaluate_config",
    "load_beir",
    "load_config",
    "load_native",
    "load_span_csv",
    "resolve_labels",
    "run_sweep",
    "score",
    "span_metrics",
]
