"""The sweep: Optuna searches the configuration space, MLflow records every trial.

Storage is a URL, as in Optuna: the default is an SQLite file under
``runs/<study>/`` so a stopped sweep resumes with the same command; point
``--storage`` at PostgreSQL to share one study between machines. The YAML's
own configuration is enqueued as the first trial (the baseline), and a
parameter set already evaluated is answered from the earlier trial.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import optuna

from sweep.config.schema import EvalConfig
from sweep.errors import SweepError, mask_url
from sweep.logs import default_output, logger
from sweep.outputs.mlflow_client import TrackingUnavailable
from sweep.outputs.render import dropped_lines
from sweep.outputs.run_view import code_version, trials_view_state
from sweep.outputs.tracking import Tracker
from sweep.outputs.writer import TrackingWriter
from sweep.pipeline.runner import Pipeline
from sweep.tuning.finish import SweepResult, finish
from sweep.tuning.loop import request_stop, work
from sweep.tuning.reconcile import TrackingGuard
from sweep.tuning.search import SearchConfig, check_study_name, default_study_name
from sweep.tuning.storage import (
    close_storage,
    embedded_stores,
    fail_dead_trials,
    open_study,
    sqlite_url,
    worker_identity,
)
from sweep.tuning.sweep_config import SweepConfig, load_sweep_config
from sweep.tuning.trials import counts, space_size
from sweep.tuning.workers import SESSION_ENV, STORAGE_ENV, TRACKING_ENV, spawn_workers, worker_label


class _NoTrialFailureWarnings(logging.Filter):
    """Optuna logs every failed trial with its traceback; the sweep prints one line of its own instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return " failed with " not in record.getMessage()


class Sweep:
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
    ):
        if worker_only:  # a spawned worker: its parent's URLs, passed in the environment
            storage, tracking_uri = (
                storage or os.environ.get(STORAGE_ENV),
                tracking_uri or os.environ.get(TRACKING_ENV),
            )
        self.config = (
            config if isinstance(config, SweepConfig) else load_sweep_config(config, list(overrides))
        )
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
        self._default_storage = sqlite_url(optuna_db)
        self.storage = storage or self.search.storage or self._default_storage
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
        self.failures: list[str] = []
        self.runs_dir = Path(runs_dir)

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

    def run(self) -> SweepResult | None:
        import sqlalchemy.exc

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        logging.getLogger("optuna.study._optimize").addFilter(_NoTrialFailureWarnings())
        try:
            study, _ = open_study(
                self.study_name,
                self.storage,
                self.search,
                self.baseline_params(),
                self.runs_dir / self.study_name / ".ask.lock",
            )
        except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as e:
            option = "--storage" if self.storage != self._default_storage else "the embedded store"
            reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise SweepError(
                f"{option} {mask_url(self.storage)}: cannot open the study ({reason}); check the URL "
                "and that the database is running"
            ) from None
        try:
            return self._run(study)
        finally:
            if hasattr(self, "guard"):
                self.guard.close()  # the queued MLflow writes are made, and the writer process ends
            close_storage(study)  # a notebook may run many sweeps: each would keep database connections open

    def _run(self, study: optuna.Study) -> SweepResult | None:
        own_tracker = self.tracker is None
        self.tracker = self.tracker or Tracker(
            self.tracking_uri, self.study_name, self.search.tracking_retry_seconds, self.tracking_option
        )
        writer = None
        if own_tracker:  # trials hand their MLflow writes to a process of their own (outputs.writer)
            writer = TrackingWriter(self.tracking_uri, self.study_name, self.search.tracking_retry_seconds)
        self.guard = TrackingGuard(self.tracker, self.say, self.search.tracking_retry_seconds, writer)
        self._repeats, self._fatal = 0, None
        self._warned: set[str] = set()
        self._rng = random.Random(f"{self.search.seed}:{self.session}:{os.getpid()}")
        self.identity = worker_identity()  # this process, as recorded on each trial it runs
        tuning_set = self.pipeline.prepare(self.base).eval_set
        if not self.worker_only:
            for key, value in {
                "objective": self.search.objective,
                "extra_objectives": self.search.extra_objectives,
                "config": str(self.path),
            }.items():
                study.set_user_attr(key, value)
        try:
            self.parent_id = self.tracker.parent(
                self.study_name,
                {
                    "sweep.config": str(self.path),
                    "sweep.code_version": code_version(),
                    "sweep.objective": self.search.objective,
                    "sweep.dataset_hash": tuning_set.content_hash,
                },
            )
        except TrackingUnavailable as e:
            raise SweepError(f"{self.tracking_option} {mask_url(self.tracking_uri)}: {e}") from None
        extra = [m for m in self.search.extra_objectives]
        self.view_key = self.guard.call(
            self.tracker.share_view, trials_view_state(list(self.search.space), extra)
        )
        self.recover(study)
        c = counts(study)
        self.say(
            f"study {self.study_name!r}: {c.done} of {self.target} trials done"
            f" (objective {self.search.objective}, {self.search.direction}"
            f"{', ' + str(self.workers) + ' workers' if self.workers > 1 else ''})\n  storage {mask_url(self.storage)}"
        )
        if not self.worker_only:
            unjudged = len(tuning_set.answerable(self.base.dataset.relevance_threshold)[1])
            self.say(
                f"  tuning on {len(tuning_set.questions)} questions"
                + (f" ({unjudged} without relevant evidence, excluded from the means)" if unjudged else "")
                + "; "
                + (
                    self.holdout.description
                    if self.holdout
                    else "no held-out questions (search.holdout.fraction: 0)"
                )
            )
            for line in dropped_lines(tuning_set.dropped):
                self.say("  " + line)
            if self.space_total is not None and self.space_total < self.trials:
                self.say(
                    f"  the search space holds {self.space_total} configuration(s): the study ends after "
                    f"{self.space_total}, not {self.trials}"
                )
        self._done = c.done
        self._stop_requested = False
        self._procs = (
            spawn_workers(self.workers - 1, self.worker_argv(), self.session, self.storage, self.tracking_uri)
            if self.workers > 1
            else []
        )
        interrupted = False
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            for sig in previous:
                signal.signal(sig, lambda signum, frame: request_stop(self, signum, frame))
        started = time.perf_counter()
        try:
            work(self, study)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self.work_seconds = time.perf_counter() - started
            for proc in self._procs:
                proc.wait()
            if in_main:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        if self._fatal is not None:
            raise self._fatal
        if self.worker_only:
            return None
        return finish(self, study, interrupted or self._stop_requested)

    def recover(self, study: optuna.Study) -> None:
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

    def fail_dead(self, study: optuna.Study) -> None:
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

    def worker_argv(self) -> list[str]:
        # the URLs travel in the environment (URLS_ENV), not on the command line, where `ps` shows any password
        argv = [
            str(self.path),
            *self.overrides,
            "--study",
            self.study_name,
            "--trials",
            str(self.trials),
            "--runs-dir",
            str(self.runs_dir),
        ]
        if self.timeout:
            argv += ["--timeout", str(self.timeout)]
        return argv + (["--lenient"] if self.lenient else [])


def run_sweep(path: str | Path, overrides: list[str] = (), **options) -> SweepResult:
    """Run (or resume) the sweep a config file describes, as ``python -m sweep CONFIG`` does.

    Args:
        path: the YAML file with its ``search:`` section.
        overrides: ``key=value`` changes of the baseline configuration.
        **options: :class:`Sweep`'s keywords: ``trials``, ``timeout``, ``storage``, ``study``,
            ``tracking_uri``, ``runs_dir``, ``workers``, ``quiet``, ``lenient``.

    Returns:
        :class:`SweepResult`: the best value and parameters, the baseline's, the held-out verdict,
        the report's path and where the study and its MLflow runs are.

    Example:
        >>> result = run_sweep("configs/hybrid.yaml", trials=10, quiet=True)
        >>> result.best_value, result.verdict.best["ndcg@10"]
    """
    return Sweep(path, overrides, **options).run()


__all__ = ["Sweep", "SweepResult", "run_sweep"]
