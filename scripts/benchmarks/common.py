"""What every section shares: where the project and the data are, and how a side is timed."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"


def timed(fn, repeat: int = 5) -> tuple[float, float, object]:
    """Median wall and median CPU seconds of ``repeat`` calls, and the last result."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), out


def timed_pair(ours, theirs, repeat: int = 5) -> tuple[tuple, tuple]:
    """:func:`timed` for two sides, their runs alternated (ours, theirs, ours, ...) so that a machine
    getting slower or faster during the comparison moves both medians alike."""
    runs: dict[str, list] = {"ours": [], "theirs": []}
    for _ in range(repeat):
        for side, fn in (("ours", ours), ("theirs", theirs)):
            runs[side].append(timed(fn, 1))
    return tuple(
        (statistics.median(r[0] for r in runs[s]), statistics.median(r[1] for r in runs[s]), runs[s][-1][2])
        for s in ("ours", "theirs")
    )


def scifact_texts() -> tuple[list[str], list[str]]:
    """SciFact's test split as raw texts: (title and abstract of each document, each question)."""
    from sweep.data import load_beir

    ds = load_beir(SHARED / "scifact", "test")
    return [f"{d.title} {d.text}" for d in ds.documents], [q.text for q in ds.questions]
