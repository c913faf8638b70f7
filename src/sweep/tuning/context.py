"""What a running sweep's loop, objective, screening and finish share: its settings, its stores and
the state of the run (the stop flag, the repeat count, the lock). Below them all, so that
:mod:`sweep.tuning.sweep` (the façade that starts a sweep) imports them and none imports it back."""

from __future__ import annotations

import os
import random
import subprocess
import uuid
from pathlib import Path
from typing import Any

from sweep.config.schema import EvalConfig
from sweep.errors import SweepError
from sweep.logs import default_output, logger
from sweep.outputs.tracking import Tracker
from sweep.pipeline.runner import Pipeline
from sweep.tuning.reconcile import TrackingGuard
from sweep.tuning.search import SearchConfig, check_study_name, default_study_name
from sweep.tuning.storage import embedded_stores, fail_dead_trials, sqlite_url
from sweep.tuning.sweep_config import SweepConfig, load_sweep_config
from sweep.tuning.trials import space_size
from sweep.tuning.workers import SESSION_ENV, STORAGE_ENV, TRACKING_ENV, AskLock, worker_label


class SweepContext:
    """A sweep's settings and run state; :class:`~sweep.tuning.sweep.Sweep` adds ``run()``.

    Args: as :class:`~sweep.tuning.sweep.Sweep`.

    Example:
        >>> context = SweepContext("configs/hybrid.yaml", quiet=True)
        >>> context.target, context.study_name
    """

    # set when the run starts (Sweep._run): the stores and this process's identity
    tracker: Tracker | None
    guard: TrackingGuard
    parent_id: str
    view_key: str | None
    identity: dict[str, Any]
    rng: random.Random
    lock: AskLock
    procs: list[subprocess.Popen]
    work_seconds: float  # the worker loop's wall time (scripts/bench reads it)

    def __init__(
        self,
        config: SweepConfig | str | Path,
        overrides: list[str] = (),
        *,
        pipeline: Pipeline | None = None,
        tracker: Tracker | None = None,
        trials: int | None = None,
        timeout: float | None = None,
        storage: str | None = None,
        study: str | None = None,
        tracking_uri: str | None = None,
        runs_dir: str | Path = "runs",
        quiet: bool = False,
        workers: int = 1,
        worker_only: bool = False,
        lenient: bool = False,
        warm_start: str | None = None,
        warm_start_storage: str | None = None,
        warm_start_top: int = 5,
    ):
        if worker_only:  # a spawned worker: its parent's URLs, passed in the environment
            storage, tracking_uri = (
                storage or os.environ.get(STORAGE_ENV),
                tracking_uri or os.environ.get(TRACKING_ENV),
            )
        if isinstance(config, SweepConfig) and lenient and not config.base.dataset.lenient:
            config, overrides = config.path, config.overrides
        if not isinstance(config, SweepConfig):  # --lenient is a setting: every trial and the winner carry it
            config = load_sweep_config(config, list(overrides) + ["dataset.lenient=true"] * lenient)
        self.config = config
        self.path, self.overrides = self.config.path, list(self.config.overrides)
        self.search, self.base, self.holdout = self.config.search, self.config.base, self.config.holdout
        self.baseline_flat = self.config.baseline_flat
        self.workers, self.worker_only = workers, worker_only
        self.trials = self.search.trials if trials is None else trials
        self.timeout = timeout or self.search.timeout
        self.study_name = (
            check_study_name(study)
            if study is not None
            else self.search.study or default_study_name(self.path.stem)
        )
        optuna_db, mlflow_db = embedded_stores(self.study_name, Path(runs_dir))
        optuna_db.parent.mkdir(parents=True, exist_ok=True)  # also holds the report and the workers' lock
        self.default_storage = sqlite_url(optuna_db)
        self.storage = storage or self.search.storage or self.default_storage
        self.tracking_uri = tracking_uri or self.search.tracking_uri or sqlite_url(mlflow_db)
        self.tracking_option = (
            "search.tracking_uri" if not tracking_uri and self.search.tracking_uri else "--tracking-uri"
        )
        self.session = os.environ.get(SESSION_ENV) or uuid.uuid4().hex[:12]
        self._space: tuple[SearchConfig, int | None] | None = None
        self.quiet = quiet
        if not quiet:
            default_output()
        self.pipeline = pipeline or Pipeline(self.base.cache_dir, lenient=lenient, progress=not quiet)
        self.tracker = tracker
        self.lenient = lenient
        if warm_start is not None:
            check_study_name(warm_start)
            source_storage = warm_start_storage or sqlite_url(embedded_stores(warm_start, Path(runs_dir))[0])
            if warm_start == self.study_name and source_storage == self.storage:
                raise SweepError(
                    f"--warm-start {warm_start}: that is this sweep's own study; name an earlier one"
                )
        if not 1 <= warm_start_top <= 10_000:
            raise SweepError(f"--warm-start-top must be between 1 and 10,000 (got {warm_start_top})")
        self.warm_start, self.warm_start_storage, self.warm_start_top = (
            warm_start,
            warm_start_storage,
            warm_start_top,
        )
        self.failures: list[str] = []
        self.runs_dir = Path(runs_dir)
        # the run's state, shared by the loop and the objective
        self.repeats = 0  # proposals in a row that repeated an evaluated configuration
        self.fatal: Exception | None = None  # an error every later trial would hit: the loop stops
        self.stop_requested = False  # the first Ctrl-C or SIGTERM: finish the current trial, then stop
        self.done = 0  # complete trials, as of the last one logged
        self.warned: set[str] = set()  # pipeline warnings said once per sweep
        self.waited_for: tuple[int, ...] = ()  # other workers' trials last said to be waited for
        self.procs = []

    @property
    def space_total(self) -> int | None:
        """Distinct configurations in the space (None: unbounded); an empty space holds the baseline only."""
        if self._space is None or self._space[0] is not self.search:
            self._space = (
                self.search,
                space_size(self.search, self.baseline_flat) if self.search.space else 1,
            )
        return self._space[1]

    @property
    def target(self) -> int:
        """The study's size: the trials asked for, or every configuration of a smaller space."""
        total = self.space_total
        return self.trials if total is None else min(self.trials, total)

    def say(self, text: str) -> None:
        """Log one line of progress (``logging.getLogger("sweep")``), prefixed by the worker's label."""
        if not self.quiet:
            body = text.lstrip("\n")
            logger.info(text[: len(text) - len(body)] + (worker_label() + body if body.strip() else body))

    def config_for(self, params: dict[str, Any], heldout: bool = False) -> EvalConfig:
        """The configuration of a trial (see :meth:`SweepConfig.for_trial`)."""
        return self.config.for_trial(params, heldout)

    def baseline_params(self) -> dict[str, Any]:
        return self.config.baseline_params()

    def recover(self, study) -> None:
        """Trials of dead workers fail (and are re-queued); MLflow is made to agree with Optuna."""
        self.guard.flush()
        failed = fail_dead_trials(study, self.search.retries, self.search.grace_period)
        fixed = self.guard.reconcile(
            study,
            self.parent_id,
            self.search.objective,
            lambda params: self.config_for(params).model_dump(mode="json", exclude={"source"}),
        )
        if failed or fixed:
            self.say_recovered(failed, [fixed.describe()] if fixed else [])

    def fail_dead(self, study) -> None:
        """What the worker loop checks between trials: a trial whose worker died (here at once, one
        that was never stamped after the grace period) fails, is re-queued and is reported."""
        failed = fail_dead_trials(study, self.search.retries, self.search.grace_period)
        if failed:
            self.say_recovered(failed, [])

    def say_recovered(self, failed: list[int], fixed: list[str]) -> None:
        retried = " and re-queued" if self.search.retries else ""
        parts = (
            [f"trial(s) {', '.join(map(str, failed))} of dead workers marked failed{retried}"]
            if failed
            else []
        )
        self.say("recovered: " + "; ".join(parts + fixed))


__all__ = ["SweepContext"]
