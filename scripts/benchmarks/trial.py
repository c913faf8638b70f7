"""Cached trials: one that changes only fusion or k, and a sweep loop of cached BM25 trials."""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT


def bench_warm_trial() -> dict:
    """A sweep trial that changes only fusion or k on SciFact's 300 questions, caches hot."""
    from sweep.config.load import load_config
    from sweep.pipeline.runner import Pipeline

    path = ROOT / "configs" / "scifact-dense.yaml"
    base = ["retrieval.mode=hybrid", "retrieval.bm25.k1=0.9", "retrieval.bm25.b=0.4"]
    pipeline = Pipeline(ROOT / ".cache" / "rag-sweep", progress=False)
    pipeline.run(load_config(path, base))  # cold: encodes SciFact once (minutes), then cached for good
    variants = [
        [f"retrieval.fusion.alpha={a / 20}", f"retrieval.top_k={k}"] for a in range(20) for k in (10, 100)
    ]
    configs = [load_config(path, base + v) for v in variants]
    times = []
    for config in configs:
        t = time.perf_counter()
        pipeline.run(config, ["ndcg@10"])
        times.append(time.perf_counter() - t)
    rrf = load_config(path, base + ["retrieval.fusion.method=rrf"])
    t = time.perf_counter()
    pipeline.run(rrf)
    t_rrf = time.perf_counter() - t
    warm = statistics.median(times) * 1000
    print(
        f"warm trial (fusion or k changed, SciFact 300 questions): median {warm:.1f} ms over {len(times)} trials, "
        f"rrf {t_rrf * 1000:.1f} ms"
    )
    return {"warm_trial_ms": warm}


def bench_sweep_trial(trials: int = 60) -> dict:
    """Cached BM25 trials inside a sweep, one worker, the embedded stores: the whole loop per trial
    (Optuna ask/tell, duplicate and surplus checks, MLflow run, metrics and artifacts, progress line).

    Measured as the median gap between consecutive trials' starts (Optuna's own timestamps), after
    the first 5; the pipeline's share is each trial's own evaluation time (``seconds``)."""

    import optuna

    from sweep.tuning.sweep import Sweep

    with tempfile.TemporaryDirectory() as tmp:
        overrides = [
            f"cache_dir={tmp}/cache",
            f"search.trials={trials}",
            "retrieval.mode=bm25",
            "search.holdout.fraction=0",
            "dataset.split=tune",
            "search.space={retrieval.bm25.k1: {float: [0.5, 1.5], step: 0.05}, retrieval.bm25.b: {float: [0.2, 1.0], step: 0.05},"
            " retrieval.top_k: {categorical: [10, 20]}}",
        ]
        sweep = Sweep(ROOT / "configs" / "hybrid.yaml", overrides, runs_dir=Path(tmp) / "runs", quiet=True)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = time.process_time()
        sweep.run()
        cpu = time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the MLflow writer, reaped when the sweep ends
        writer_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
        done = sorted(
            optuna.load_study(study_name="hybrid", storage=sweep.storage).trials, key=lambda t: t.number
        )
    gaps = [(b.datetime_start - a.datetime_start).total_seconds() * 1000 for a, b in zip(done[5:], done[6:])]
    evaluation = statistics.median(t.user_attrs.get("seconds", 0.0) for t in done[5:]) * 1000
    trial_ms = statistics.median(gaps)
    print(
        f"cached BM25 trial inside a sweep ({len(done)} trials, bundled set, SQLite stores): median "
        f"{trial_ms:.0f} ms wall per trial, of which evaluation {evaluation:.0f} ms; "
        f"{cpu / len(done) * 1000:.0f} ms CPU per trial over the whole command, and {writer_cpu / len(done) * 1000:.0f} "
        f"ms in the MLflow writer process beside it; {60_000 / trial_ms:.0f} warm trials per minute"
    )
    return {
        "sweep_trial_ms": trial_ms,
        "trials_per_min_warm": 60_000 / trial_ms,
        "sweep_trial_eval_ms": evaluation,
        "sweep_trial_cpu_ms": cpu / len(done) * 1000,
        "sweep_trial_writer_cpu_ms": writer_cpu / len(done) * 1000,
    }
