"""Screening's saving: the default demo's sweep from a cold cache, with and without ``search.screen``.

Both runs are the same command (``configs/hybrid.yaml``, its seed and trial count), each in a cache of
its own; only ``search.screen`` differs. The saving is in texts the models embedded (vectors written
to the cache: chunks, questions and the bi-encoder reranker's candidates), the figure that decides a sweep's wall time, and it counts only if the
best configuration found is the same in both runs.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT


def vectors_written(cache: Path) -> int:
    """Rows of vectors (not the reranker's one-number scores) the run's models wrote to its cache."""
    from sweep.cache import read_arrays

    shards = [read_arrays(path)["rows"] for path in (cache / "rows").rglob("*.arr")]
    return sum(len(rows) for rows in shards if rows.ndim == 2 and rows.shape[1] > 1)


def demo_sweep(screen: str) -> tuple[int, dict, float, int]:
    """(texts encoded, best parameters, wall seconds, trials screened out) of one cold demo sweep."""
    import optuna

    from sweep.tuning.sweep import Sweep

    with tempfile.TemporaryDirectory() as tmp:
        overrides = [f"cache_dir={tmp}/cache", f"search.screen={screen}"]
        sweep = Sweep(ROOT / "configs" / "hybrid.yaml", overrides, runs_dir=Path(tmp) / "runs", quiet=True)
        t = time.perf_counter()
        result = sweep.run()
        wall = time.perf_counter() - t
        encoded = vectors_written(Path(tmp) / "cache")
        trials = optuna.load_study(study_name=sweep.study_name, storage=sweep.storage).trials
        screened = sum(bool(t.user_attrs.get("screened_out")) for t in trials)
        return encoded, result.best_params, wall, screened


def bench_screen() -> dict:
    on = "{pool: 20}"
    off_encoded, off_best, off_wall, _ = demo_sweep("null")
    on_encoded, on_best, on_wall, screened = demo_sweep(on)
    saved = 1 - on_encoded / off_encoded
    same = on_best == off_best
    print(
        f"screening on the demo's space (search.screen {on}): {on_encoded} texts encoded against "
        f"{off_encoded} without ({saved:.0%} saved), {screened} trials screened out; best configuration "
        f"{'unchanged' if same else 'CHANGED: ' + repr(on_best) + ' against ' + repr(off_best)}; "
        f"wall {on_wall:.0f} s against {off_wall:.0f} s"
    )
    return {"screen_encode_saved": saved if same else 0.0, "screen_best_unchanged": same}
