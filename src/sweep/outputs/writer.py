"""A trial's MLflow writes, off the trial's path: a child process owns a :class:`Tracker` and makes
the calls in the order the sweep made them, while the sweep goes on with its next trial.

Why a process and not a thread: MLflow's SQL store spends its time in Python (SQLAlchemy), so a
writer thread would fight the trial loop for the GIL. Measured here, a thread logging runs beside a
busy loop logged one run per 1.4 s instead of one per 29 ms alone. A second process runs on another
core. Optuna stays the truth: a kill loses at most the writes still queued, and the next start's
reconcile pass logs those trials from what the study recorded (:mod:`sweep.tuning.reconcile`).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from sweep.outputs.mlflow_client import TrackingUnavailable

MAX_PENDING = 24  # calls queued before the sweep waits for MLflow (when MLflow is slower than trials)


class TrackingWriter:
    """Queue :class:`~sweep.outputs.tracking.Tracker` calls to a child process, in order.

    Args:
        tracking_uri: the store the child's own tracker opens (the sweep's has created it already).
        experiment: the experiment (the study's name).
        retry_seconds: each call's retry window before the child's tracker goes offline.

    Example:
        >>> writer = TrackingWriter("sqlite:///runs/mlflow.db", "hybrid", 60.0)  # doctest: +SKIP
        >>> writer.call("close_trial", 3, "complete")  # returns at once  # doctest: +SKIP
        >>> writer.flush()  # every call made; returns what MLflow refused  # doctest: +SKIP
    """

    def __init__(self, tracking_uri: str, experiment: str, retry_seconds: float):
        # a new interpreter, not multiprocessing: a fork would share the parent's SQLAlchemy connections
        # (and torch's threads), and multiprocessing's spawn re-runs a user script lacking a main guard
        to_child, from_parent = os.pipe()
        from_child, to_parent = os.pipe()
        # the parent's module search path, in its order: the child imports this same sweep and libraries
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "sweep.outputs.writer", str(to_child), str(to_parent), str(os.getpid())],
            pass_fds=(to_child, to_parent),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        os.close(to_child)
        os.close(to_parent)
        _widen(from_parent)
        self._out = Connection(from_parent, readable=False)
        self._in = Connection(from_child, writable=False)
        self.pending = 0
        self.alive = True
        # the URI travels through the pipe, not the command line, where `ps` would show a password
        self._out.send((tracking_uri, experiment, retry_seconds))

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._proc.pid

    def call(self, method: str, *args) -> list[str]:
        """Queue ``tracker.<method>(*args)``; waits only while MAX_PENDING calls are still queued.

        Returns:
            What earlier calls reported since the last look: ``"unavailable: ..."`` when MLflow did not
            answer, ``"error: ..."`` when it refused a call.
        """
        reports = self._collect(until=MAX_PENDING - 1)
        if self.alive:
            try:
                self._out.send((method, args))
                self.pending += 1
            except (BrokenPipeError, EOFError, OSError):
                reports.append(self._died())
        return reports

    def flush(self) -> list[str]:
        """Wait until every queued call is made; returns what they reported (see :meth:`call`)."""
        return self._collect(until=0)

    def close(self) -> list[str]:
        """Make the queued calls, then stop the child."""
        reports = self.flush()
        if self.alive:
            try:
                self._out.send(None)
                self._proc.wait(timeout=30)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self._proc.kill()
            self.alive = False
        self._out.close()
        self._in.close()
        return reports

    def _collect(self, until: int) -> list[str]:
        """Read the child's replies without waiting, then waiting while more than ``until`` are due."""
        reports: list[str] = []
        while self.alive and self.pending:
            if self.pending <= until and not self._in.poll():
                break
            if not self._in.poll(1.0):
                if self._proc.poll() is not None:
                    reports.append(self._died())
                continue
            try:
                reply = self._in.recv()
            except (EOFError, OSError):
                reports.append(self._died())
                break
            self.pending -= 1
            if reply is not None:
                reports.append(reply)
        return reports

    def _died(self) -> str:
        self.alive, lost, self.pending = False, self.pending, 0
        return (
            f"error: the writer process exited (code {self._proc.poll()}) with {lost} call(s) queued; "
            "this process logs from now on, and the trials it missed are logged from the study at the end"
        )


def serve(requests: Connection, replies: Connection, parent: int) -> None:
    """The child: make each call received, answer None or what went wrong, until told to stop."""
    _die_with(parent)
    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C reaches the whole group: the parent decides
        signal.signal(sig, signal.SIG_IGN)
    import sqlalchemy

    from sweep.locks import write_ahead
    from sweep.outputs.tracking import Tracker

    write_ahead(sqlalchemy.engine.Engine)  # this process opens MLflow's store only
    try:
        tracking_uri, experiment, retry_seconds = requests.recv()
    except (EOFError, OSError):
        return
    try:
        tracker, broken = Tracker(tracking_uri, experiment, retry_seconds), None
    except Exception as e:  # noqa: BLE001 - every call then reports it
        tracker, broken = None, f"unavailable: MLflow {str(e).strip().splitlines()[0][:200]}"
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:  # empties the pipe at once: a full pipe (64 KiB) would block the sweep's send
        while True:
            try:
                inbox.put(requests.recv())
            except (EOFError, OSError):  # the parent is gone
                inbox.put(None)
                return

    threading.Thread(target=read, name="sweep-writer-inbox", daemon=True).start()
    while True:
        message = inbox.get()
        if message is None:
            return
        method, args = message
        reply = broken
        if tracker is not None:
            try:
                target = tracker
                for name in method.split("."):  # "client.probe": the tracker's client
                    target = getattr(target, name)
                target(*args)
            except TrackingUnavailable as e:
                reply = f"unavailable: {e}"
            except Exception as e:  # noqa: BLE001 - MLflow refused the call: the sweep says so
                reason = f"{type(e).__name__}: {str(e).strip()[:300]}"
                reply = f"error: {method} failed ({reason}); the study keeps the trial, and reconcile logs it"
        replies.send(reply)


def _widen(pipe: int) -> None:
    """Room for several trials' logs (~100 KB each) in the pipe itself, where Linux allows it: a full
    pipe would make the sweep wait for the child's reader to get the GIL."""
    try:
        import fcntl

        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, min(limit, 4 << 20))
    except (ImportError, AttributeError, OSError, ValueError):
        pass  # not Linux: the child's reader thread empties the pipe as it can


def _die_with(parent: int) -> None:
    """A parent killed outright must not leave its writer logging behind the next run's reconcile pass."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(0)


__all__ = ["MAX_PENDING", "TrackingWriter"]

if __name__ == "__main__":  # python -m sweep.outputs.writer READ_FD WRITE_FD PARENT_PID
    serve(
        Connection(int(sys.argv[1]), writable=False),
        Connection(int(sys.argv[2]), readable=False),
        int(sys.argv[3]),
    )
