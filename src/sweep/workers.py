"""Several processes, one study: Optuna's storage is the only coordinator.

``--workers N`` starts N − 1 more copies of the same command (each a plain
worker: it runs trials until the study has its count, then exits) and works
as the first one itself; on other machines the same command pointed at the
same PostgreSQL URL joins in the same way. The study's size is a count of
finished trials (complete or pruned), so however many workers share it, and
whichever of them die, it ends with exactly that many.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.trial import TrialState

WORKER_ENV = "RAG_SWEEP_WORKER"


@dataclass(frozen=True)
class Counts:
    done: int  # complete + pruned: what the study's size counts
    running: int
    failed: int


def counts(study: optuna.Study) -> Counts:
    states = [t.state for t in study.get_trials(deepcopy=False)]
    return Counts(sum(s in (TrialState.COMPLETE, TrialState.PRUNED) for s in states),
                  states.count(TrialState.RUNNING), states.count(TrialState.FAIL))  # fmt: skip


def is_surplus(study: optuna.Study, trial_number: int, target: int) -> bool:
    """Two machines may start the last trial at once; the one with the higher number stands down."""
    live = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
    ahead = [t for t in study.get_trials(deepcopy=False, states=live) if t.number < trial_number]
    return len(ahead) >= target


class AskLock:
    """Local workers take turns between "is another trial needed?" and Optuna creating it."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh = None

    def acquire(self) -> None:
        import fcntl

        self._fh = open(self.path, "a")
        fcntl.flock(self._fh, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._fh is not None:
            import fcntl

            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def worker_label() -> str:
    n = os.environ.get(WORKER_ENV)
    return f"[w{n}] " if n else ""


def spawn_workers(n: int, argv: list[str]) -> list[subprocess.Popen]:
    """Start ``n`` worker copies of this sweep; they share the study, the caches and the terminal."""
    procs = []
    for i in range(n):
        env = {**os.environ, WORKER_ENV: str(i + 2)}
        procs.append(subprocess.Popen([sys.executable, "-m", "sweep", "sweep", *argv, "--worker-only"], env=env))
    return procs


def signal_all(procs: list[subprocess.Popen], signum: int) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signum)


__all__ = ["AskLock", "Counts", "counts", "is_surplus", "signal_all", "spawn_workers", "worker_label"]
