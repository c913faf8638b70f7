"""How a trial looks in MLflow: flat parameter names, only the settings that matter, metric names,
the saved runs view and the command that opens the UI. Plain functions, no MLflow calls."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from sweep.analysis.verdict import Verdict


def flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def applicable(flat: dict[str, Any]) -> dict[str, Any]:
    """The flat configuration without the settings that play no part in it (a dense model in a BM25
    trial, fusion without two retrievers, a disabled reranker's model), so MLflow does not show them
    as if they mattered.

    Example:
        >>> sorted(applicable({"retrieval.mode": "bm25", "retrieval.dense.model": "m", "retrieval.bm25.k1": 1}))
        ['retrieval.bm25.k1', 'retrieval.mode']
    """
    mode = flat.get("retrieval.mode")
    skip = []
    if mode == "bm25":
        skip += ["retrieval.dense.", "retrieval.fusion."]
    elif mode == "dense":
        skip += ["retrieval.bm25.", "retrieval.fusion."]
    elif flat.get("retrieval.fusion.method") == "rrf":
        skip += ["retrieval.fusion.alpha", "retrieval.fusion.normalization"]
    elif flat.get("retrieval.fusion.method") == "linear":
        skip += ["retrieval.fusion.rrf_k"]
    if not flat.get("retrieval.rerank.enabled", True):
        skip += [k for k in flat if k.startswith("retrieval.rerank.") and k != "retrieval.rerank.enabled"]
    transform = flat.get("retrieval.query.transform")
    skip += {
        "none": [
            "retrieval.query.rm3.",
            "retrieval.query.prf.",
            "retrieval.query.plugin",
            "retrieval.query.rrf_k",
        ],
        "rm3": ["retrieval.query.prf.", "retrieval.query.plugin", "retrieval.query.rrf_k"],
        "dense_prf": ["retrieval.query.rm3.", "retrieval.query.plugin", "retrieval.query.rrf_k"],
        "multi_query": ["retrieval.query.rm3.", "retrieval.query.prf.", "retrieval.query.plugin"],
        "plugin": ["retrieval.query.rm3.", "retrieval.query.prf."],
    }.get(transform, [])
    if flat.get("chunking.strategy") == "document":
        skip += ["chunking.size", "chunking.overlap", "chunking.unit", "chunking.tokenizer"]
    return {
        k: v
        for k, v in flat.items()
        if not any(k == p or (p.endswith(".") and k.startswith(p)) for p in skip)
    }


def default_artifact_location(tracking_uri: str) -> str | None:
    """Artifacts of an embedded SQLite store live beside it, not in ./mlruns of whatever folder we run in."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri.removeprefix("sqlite:///"))
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None  # a tracking server decides for itself


def mlflow_name(metric: str) -> str:
    return metric.replace("@", "_at_")


def code_version() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        return (
            subprocess.run(
                ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def verdict_metrics(verdict: Verdict) -> dict[str, float]:
    """The held-out verdict as parent-run metrics: ``heldout_ndcg_at_10``, its ``_ci_low``/``_ci_high``, the baseline's, the delta and its p-value."""
    out: dict[str, float] = {}
    for name, value in verdict.best.items():
        m = mlflow_name(name)
        out[f"heldout_{m}"] = value
        lo, hi = verdict.intervals[name]
        out[f"heldout_{m}_ci_low"], out[f"heldout_{m}_ci_high"] = lo, hi
        if name in verdict.baseline:
            out[f"heldout_baseline_{m}"] = verdict.baseline[name]
        if name in verdict.comparison.metrics:
            out[f"heldout_delta_{m}"] = verdict.comparison.metrics[name].delta
            out[f"heldout_p_{m}"] = verdict.comparison.metrics[name].p_value
    out["heldout_questions"] = float(verdict.n_questions)
    return out


ONLY_TRIALS = "tags.`sweep.trial` LIKE '%'"  # the parent filtered out


def trials_view_state(searched: list[str], metrics: list[str] = ()) -> dict:
    """The MLflow runs view of a study: its trials, best objective first, with the objective, the other
    objectives and every searched parameter as columns (MLflow shows no metric or parameter by default)."""
    columns = ["metrics.`objective`", *(f"metrics.`{mlflow_name(m)}`" for m in metrics)]
    return {
        "searchFilter": ONLY_TRIALS,
        "orderByKey": "metrics.`objective`",
        "orderByAsc": False,
        "selectedColumns": columns + [f"params.`{p}`" for p in searched],
    }


def trials_view_url(server: str, experiment_id: str, share_key: str | None = None) -> str:
    """Where to compare the trials: the study's shared view (see :meth:`Tracker.share_view`) when it was
    saved, else the trials filtered and sorted by objective.

    Example:
        >>> trials_view_url("http://127.0.0.1:5000", "1", "a1b2")
        'http://127.0.0.1:5000/#/experiments/1/runs?viewStateShareKey=a1b2'
    """
    from urllib.parse import quote

    if share_key:
        return f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={share_key}"
    query = f"searchFilter={quote(ONLY_TRIALS)}&orderByKey={quote('metrics.`objective`')}&orderByAsc=false"
    return f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"


def ui_command(tracking_uri: str) -> str:
    return f"mlflow ui --backend-store-uri {tracking_uri}" + ("" if os.name == "nt" else " --port 5000")
