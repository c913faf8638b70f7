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

from sweep.chunking import ChunkingConfig, ChunkSet, chunk_corpus
from sweep.config.load import load_config
from sweep.config.schema import EvalConfig
from sweep.data import EvalSet, load_beir, load_files, load_native, load_span_csv
from sweep.errors import ConfigError, DataError, SweepError
from sweep.labels import HitRule, Labels, resolve_labels
from sweep.metrics import Scores, evaluate, score, span_metrics

__version__ = "0.1.0"

_LAZY = {  # name -> module: these import Optuna, MLflow or the models
    "EvalResult": "pipeline.result",
    "Pipeline": "pipeline.runner",
    "evaluate_config": "pipeline.evaluate",
    "Sweep": "tuning.sweep",
    "SweepResult": "tuning.finish",
    "SweepConfig": "tuning.sweep_config",
    "load_sweep_config": "tuning.sweep_config",
    "run_sweep": "tuning.sweep",
    "compare_scores": "analysis.compare",
    "Hit": "serving.retriever",
    "Retriever": "serving.retriever",
    "gate": "serving.gate",
}

if TYPE_CHECKING:
    from sweep.analysis.compare import compare_scores
    from sweep.pipeline.evaluate import evaluate_config
    from sweep.pipeline.result import EvalResult
    from sweep.pipeline.runner import Pipeline
    from sweep.serving.gate import gate
    from sweep.serving.retriever import Hit, Retriever
    from sweep.tuning.finish import SweepResult
    from sweep.tuning.sweep import Sweep, run_sweep
    from sweep.tuning.sweep_config import SweepConfig, load_sweep_config


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
    "SweepConfig",
    "SweepError",
    "SweepResult",
    "chunk_corpus",
    "compare_scores",
    "evaluate",
    "evaluate_config",
    "gate",
    "load_beir",
    "load_config",
    "load_files",
    "load_native",
    "load_span_csv",
    "load_sweep_config",
    "resolve_labels",
    "run_sweep",
    "score",
    "span_metrics",
]
