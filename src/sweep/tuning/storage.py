"""Where a study lives, and how it recovers from workers that died.

Storage is an Optuna URL. SQLite and PostgreSQL get Optuna's RDB storage
with heartbeats: a worker that stops beating for ``grace_period`` seconds
(killed, machine lost) has its trial failed by whoever looks next, and
Optuna's RetryHeartbeatStaleTrialCallback queues a copy with the same parameters.
On one machine we need not wait for the grace period: a RUNNING trial whose
recorded process no longer exists is failed at once. A trial that was never
stamped with its worker (killed between Optuna creating it and its first
heartbeat) has neither pid nor heartbeat: after the grace period it is failed
too, else the study would wait for it forever. MLflow runs those trials left
RUNNING are closed as KILLED.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from datetime import datetime
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from sweep.errors import SweepError, mask_url
from sweep.locks import create_whole, first_use_lock, write_ahead
from sweep.tuning.search import SearchConfig
from sweep.tuning.space import grid
from sweep.tuning.trials import WORKER_ATTR, worker_seed
from sweep.tuning.workers import AskLock, worker_number


def embedded_stores(study: str, runs_dir: Path) -> tuple[Path, Path]:
    """The one-machine defaults: the study in runs/<study>/optuna.db, MLflow in runs/mlflow.db."""
    return runs_dir / study / "optuna.db", runs_dir / "mlflow.db"


def load_existing_study(study_name: str, storage: str | None, runs_dir: Path) -> optuna.Study:
    """A study a sweep has written (``sweep report``, ``sweep export``); one-line errors when there is none.

    Args:
        study_name: the study's name (the config file's name unless ``--study`` was given).
        storage: its Optuna storage URL; None for the embedded ``runs_dir/<study>/optuna.db``.
        runs_dir: where the embedded stores live.

    Returns:
        The loaded :class:`optuna.Study`.
    """
    if storage is None:
        db, _ = embedded_stores(study_name, runs_dir)
        if not db.exists():
            raise SweepError(
                f"no study {study_name!r} under {runs_dir}/ (looked for {db}); run the sweep first, "
                "or pass --storage URL"
            )
        storage = sqlite_url(db)
    try:
        return optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise SweepError(
            f"no study {study_name!r} in {mask_url(storage)} (it has: {', '.join(names) or 'none'})"
        ) from None


def close_storage(study: optuna.Study) -> None:
    """Close the study's database connections (Optuna keeps its engine's pool open for the process)."""
    storage = getattr(study._storage, "_backend", study._storage)  # Optuna wraps RDBStorage in a cache
    if isinstance(storage, RDBStorage):
        storage.engine.dispose()


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


def open_storage(url: str, search: SearchConfig):
    """Optuna's RDB storage; several processes creating its tables at once on a new database retry."""
    import random

    import sqlalchemy.exc

    create_whole(url, lambda tmp: RDBStorage(tmp).engine.dispose())  # a kill leaves no half-made file
    for attempt in range(5):
        try:
            with first_use_lock(url):
                return _open_storage(url, search)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            if attempt == 4:
                raise
            time.sleep(random.uniform(0.2, 1.0))  # another process was creating the same tables


def _open_storage(url: str, search: SearchConfig):
    """Optuna's RDB storage with heartbeats for database URLs; any other URL as Optuna reads it."""
    if not url.startswith(("sqlite:", "postgresql", "mysql")):
        return url
    # SQLite serialises writers: wait for the lock instead of failing under several workers
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite:") else {"pool_pre_ping": True}
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", optuna.exceptions.ExperimentalWarning
        )  # heartbeats: stable in practice
        retry = RetryHeartbeatStaleTrialCallback(max_retry=search.retries) if search.retries else None
        storage = RDBStorage(
            url,
            engine_kwargs=engine,
            heartbeat_interval=search.heartbeat_interval,
            grace_period=search.grace_period,
            heartbeat_stale_trial_callback=retry,
        )
    write_ahead(storage.engine)  # SQLite: commits without waiting for the disk (locks.write_ahead)
    storage.engine.dispose()  # the connection that made the tables reconnects with it
    return storage


def process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (tells a live process from a reused pid), None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else fields[19]  # a zombie is dead, only not yet reaped
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "unknown"


def worker_identity() -> dict[str, str | int]:
    """This process as a trial's ``worker`` attribute records it (with ``trial`` and ``session`` added)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "started": process_start(pid) or "unknown"}


def _dead_here(trial: optuna.trial.FrozenTrial) -> bool:
    worker = trial.user_attrs.get(WORKER_ATTR) or {}
    if worker.get("host") != socket.gethostname() or "pid" not in worker:
        return False
    if worker.get("trial") != trial.number:
        return False  # a retry copy still carries the dead worker's pid until its new worker stamps it
    started = process_start(int(worker["pid"]))
    return started is None or (started != "unknown" and started != worker.get("started"))


def _never_stamped(trial: optuna.trial.FrozenTrial, grace_seconds: float) -> bool:
    """Created but not stamped with its worker for ``grace_seconds``: a live worker stamps it at once."""
    if (trial.user_attrs.get(WORKER_ATTR) or {}).get("trial") == trial.number or trial.datetime_start is None:
        return False
    return (
        datetime.now() - trial.datetime_start
    ).total_seconds() > grace_seconds  # Optuna's naive local time


def fail_dead_trials(study: optuna.Study, retries: int, grace_seconds: float) -> list[int]:
    """Fail RUNNING trials of dead processes: this machine's at once, others after the heartbeat grace
    period, and those no worker ever stamped after ``grace_seconds``. Returns their numbers."""
    failed = []
    storage = study._storage  # Optuna's public API exposes no setter for another process's trial
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in running:
        if not (_dead_here(trial) or _never_stamped(trial, grace_seconds)):
            continue
        try:
            storage.set_trial_user_attr(
                trial._trial_id, "error", "its worker process died (killed?) mid-trial"
            )
            storage.set_trial_user_attr(trial._trial_id, "fail_kind", "worker_died")
            changed = storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:
            changed = False  # another worker got there first
        if changed:
            failed.append(trial.number)
            if retries:
                RetryHeartbeatStaleTrialCallback(max_retry=retries)(study, storage.get_trial(trial._trial_id))
    if running and isinstance(storage, RDBStorage) and storage.is_heartbeat_enabled():  # none: none stale
        before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
        optuna.storages.fail_stale_trials(study)
        failed += sorted(
            {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))} - before
        )
    return failed


def make_sampler(search: SearchConfig, seed: int):
    """The configured Optuna sampler with the given seed."""
    if search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if search.sampler == "grid":
        return optuna.samplers.GridSampler(grid(search), seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def open_study(
    name: str, url: str, search: SearchConfig, baseline: dict, lock_path: Path, warm: list[dict] = ()
) -> tuple[optuna.Study, bool]:
    """The study, created by exactly one process (the storage's unique name decides atomically).

    The creator keeps the study's seed and enqueues the baseline; every other process (a spawned
    worker, another machine) samples with a seed of its own, so workers do not propose alike.

    Args:
        name: the study's name.
        url: its storage URL.
        search: the search settings (sampler, seed, pruner, directions).
        baseline: the baseline's parameters, enqueued as trial 0.
        warm: parameter sets the creator enqueues after it (``--warm-start``).
        lock_path: a file lock local workers share, for the rare late enqueue.

    Returns:
        (the study, whether this process created it).
    """
    pruner = {
        "median": optuna.pruners.MedianPruner(n_startup_trials=3),
        "none": optuna.pruners.NopPruner(),
        "successive_halving": optuna.pruners.SuccessiveHalvingPruner(),
    }[search.pruner]
    storage = open_storage(url, search)
    n = worker_number()
    if n is None:
        try:
            study = optuna.create_study(
                study_name=name,
                storage=storage,
                pruner=pruner,
                sampler=make_sampler(search, search.seed),
                directions=search.directions,
            )
            study.enqueue_trial(baseline, user_attrs={"baseline": True})
            for params in warm:
                study.enqueue_trial(params, user_attrs={"warm_start": True}, skip_if_exists=True)
            return study, True
        except optuna.exceptions.DuplicatedStudyError:
            pass
    identity = f"worker-{n}" if n is not None else f"{socket.gethostname()}:{os.getpid()}"
    study = optuna.load_study(
        study_name=name,
        storage=storage,
        pruner=pruner,
        sampler=make_sampler(search, worker_seed(search.seed, identity)),
    )
    if [d.name.lower() for d in study.directions] != search.directions:
        raise SweepError(
            f"study {name!r} optimises {[d.name.lower() for d in study.directions]}, "
            f"this config {search.directions}: give this sweep a new --study name"
        )
    deadline = time.monotonic() + 10
    while not study.get_trials(deepcopy=False) and time.monotonic() < deadline:
        time.sleep(0.2)  # its creator enqueues the baseline right after creating it
    if not study.get_trials(deepcopy=False):  # the creator died in between: enqueue it here, once
        lock = AskLock(lock_path)
        lock.acquire()
        try:
            if not study.get_trials(deepcopy=False):
                study.enqueue_trial(baseline, user_attrs={"baseline": True})
        finally:
            lock.release()
    return study, False
