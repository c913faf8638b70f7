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
from pathlib import Path

from sweep.locks import file_lock

WORKER_ENV = "RAG_SWEEP_WORKER"  # the worker's number, 2.. for spawned copies
SESSION_ENV = "RAG_SWEEP_SESSION"  # one id for the processes of one command, for the failed-trial count
STORAGE_ENV, TRACKING_ENV = (
    "RAG_SWEEP_STORAGE",
    "RAG_SWEEP_TRACKING_URI",
)  # kept off the command line (passwords)


class AskLock:
    """Local workers take turns between "is another trial needed?" and Optuna creating it."""

    def __init__(self, path: Path):
        self.path = path
        self._held: contextlib.ExitStack | None = None

    def acquire(self) -> None:
        self._held = contextlib.ExitStack()
        self._held.enter_context(file_lock(self.path))

    def release(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None


def worker_label() -> str:
    n = os.environ.get(WORKER_ENV)
    return f"[w{n}] " if n else ""


def worker_number() -> int | None:
    """2, 3, ... in a worker spawned by ``--workers``; None in a process the user started."""
    n = os.environ.get(WORKER_ENV)
    return int(n) if n and n.isdigit() else None


def spawn_workers(
    n: int, argv: list[str], session: str, storage: str, tracking_uri: str
) -> list[subprocess.Popen]:
    """Start ``n`` worker copies of this sweep; they share the study, the caches and the terminal."""
    procs = []
    for i in range(n):
        env = {
            **os.environ,
            WORKER_ENV: str(i + 2),
            SESSION_ENV: session,
            STORAGE_ENV: storage,
            TRACKING_ENV: tracking_uri,
        }
        procs.append(
            subprocess.Popen([sys.executable, "-m", "sweep", "sweep", *argv, "--worker-only"], env=env)
        )
    return procs


def signal_all(procs: list[subprocess.Popen], signum: int) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signum)


__all__ = [
    "AskLock",
    "SESSION_ENV",
    "STORAGE_ENV",
    "TRACKING_ENV",
    "signal_all",
    "spawn_workers",
    "worker_label",
    "worker_number",
]
