"""Whole sweeps: a small one from a cold cache, and trials per minute with 1 and 2 workers."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT


def bench_sweep() -> dict:
    """A small sweep from a cold cache: its wall time against the time spent encoding unique texts."""

    from sweep.tuning.sweep import Sweep

    with tempfile.TemporaryDirectory() as tmp:
        overrides = [
            f"cache_dir={tmp}/cache",
            "search.trials=12",
            "retrieval.dense.model=minilm-l6",
            "search.space={chunking.size: {categorical: [100, 200]}, retrieval.mode: {categorical: [hybrid, dense]},"
            " retrieval.fusion.alpha: {float: [0.0, 1.0], step: 0.1}}",
        ]
        sweep = Sweep(ROOT / "configs" / "hybrid.yaml", overrides, runs_dir=Path(tmp) / "runs", quiet=True)
        t = time.perf_counter()
        sweep.run()
        wall = time.perf_counter() - t
        encode = sum(e.stats.seconds for e in sweep.pipeline._encoders.values())
        encoded = sum(e.stats.encoded for e in sweep.pipeline._encoders.values())
        trials = sweep.work_seconds
        import optuna

        first = optuna.load_study(study_name="hybrid", storage=sweep.storage).trials[0].user_attrs["seconds"]
    print(
        f"sweep, 12 trials on the bundled set from a cold cache: {wall:.1f} s in all, {trials:.1f} s of trials; "
        f"{encoded} unique texts encoded in {encode:.1f} s; trials / encoding = {trials / encode:.2f}, "
        f"whole run (held-out evaluation, report, plots) / encoding = {wall / encode:.2f}; cold first trial {first:.1f} s"
    )
    return {
        "sweep_over_unique_encode": trials / encode,
        "sweep_whole_over_unique_encode": wall / encode,
        "cold_trial_seconds": first,
    }


def bench_workers() -> dict:
    """Trials per minute with 1 and 2 worker processes (BM25 trials on the bundled set, SQLite stores)."""
    import tempfile

    rates = {}
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                "-m",
                "sweep",
                str(ROOT / "configs" / "hybrid.yaml"),
                "--trials",
                "40",
                "--workers",
                str(workers),
                "--runs-dir",
                f"{tmp}/runs",
                f"cache_dir={tmp}/cache",
                "retrieval.mode=bm25",
                "search.holdout.fraction=0",
                "dataset.split=tune",
                "search.space={retrieval.bm25.k1: {float: [0.5, 1.5], step: 0.05}, retrieval.bm25.b: {float: [0.2, 1.0], step: 0.05},"
                " retrieval.top_k: {categorical: [10, 20]}}",
            ]
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp)
            rates[workers] = 40 / (time.perf_counter() - t) * 60
    print(
        f"trials per minute (40 BM25 trials, whole command): 1 worker {rates[1]:.0f}, 2 workers {rates[2]:.0f} "
        f"({rates[2] / rates[1]:.2f}x)"
    )
    return {"trials_per_min_1_worker": rates[1], "trials_per_min_2_workers": rates[2]}
