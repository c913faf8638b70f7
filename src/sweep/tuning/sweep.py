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
from pathlib import Path

import optuna

from sweep.errors import SweepError, mask_url
from sweep.outputs.mlflow_client import TrackingUnavailable
from sweep.outputs.render import dropped_lines
from sweep.outputs.run_view import code_version, trials_view_state
from sweep.outputs.tracking import Tracker
from sweep.outputs.writer import TrackingWriter
from sweep.tuning.context import SweepContext
from sweep.tuning.finish import SweepResult, finish
from sweep.tuning.loop import request_stop, work
from sweep.tuning.reconcile import TrackingGuard
from sweep.tuning.storage import close_storage, open_study, worker_identity
from sweep.tuning.trials import counts
from sweep.tuning.warm_start import warm_start
from sweep.tuning.workers import spawn_workers


class _NoTrialFailureWarnings(logging.Filter):
    """Optuna logs every failed trial with its traceback; the sweep prints one line of its own instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return " failed with " not in record.getMessage()


class Sweep(SweepContext):
    """A sweep: open (or resume) the study, run the trials in this process and its workers, finish.

    Args:
        config: a :class:`SweepConfig` or the path of the YAML file with its ``search:`` section.
        overrides: ``key=value`` changes of the baseline configuration.
        pipeline, tracker: a pipeline or an MLflow tracker to reuse (default: new ones).
        trials, timeout, storage, study, tracking_uri, runs_dir: the command line's options.
        quiet: log nothing.
        workers: processes in all (this one and ``workers - 1`` spawned).
        worker_only: run trials only (a spawned worker): no summary, no report.
        lenient: skip broken eval-set records instead of stopping (``--lenient``).
        warm_start, warm_start_storage, warm_start_top: queue the ``warm_start_top`` best
            configurations of that earlier study (in that storage) when this study is created.

    Example:
        >>> result = Sweep("configs/hybrid.yaml", trials=4, quiet=True).run()
    """

    def run(self) -> SweepResult | None:
        import sqlalchemy.exc

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        logging.getLogger("optuna.study._optimize").addFilter(_NoTrialFailureWarnings())
        warm = None
        if self.warm_start and not self.worker_only:
            warm = warm_start(
                self.warm_start,
                self.warm_start_storage,
                self.runs_dir,
                self.search,
                self.baseline_flat,
                self.warm_start_top,
            )
        try:
            study, created = open_study(
                self.study_name,
                self.storage,
                self.search,
                self.baseline_params(),
                self.runs_dir / self.study_name / ".ask.lock",
                warm.params if warm else [],
            )
        except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as e:
            option = "--storage" if self.storage != self.default_storage else "the embedded store"
            reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise SweepError(
                f"{option} {mask_url(self.storage)}: cannot open the study ({reason}); check the URL "
                "and that the database is running"
            ) from None
        if warm is not None:
            self.say(
                warm.describe()
                if created
                else f"study {self.study_name!r} exists: --warm-start "
                "queues trials only when a study is created (give this sweep a new --study name)"
            )
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
        self.repeats, self.fatal = 0, None
        self.rng = random.Random(f"{self.search.seed}:{self.session}:{os.getpid()}")
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
        self.done = c.done
        self.stop_requested = False
        self.procs = (
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
            for proc in self.procs:
                proc.wait()
            if in_main:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        if self.fatal is not None:
            raise self.fatal
        if self.worker_only:
            return None
        return finish(self, study, interrupted or self.stop_requested)

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
        return argv  # --lenient travels as dataset.lenient=true, among the overrides


def run_sweep(path: str | Path, overrides: list[str] = (), **options) -> SweepResult:
    """Run (or resume) the sweep a config file describes, as ``python -m sweep CONFIG`` does.

    Args:
        path: the YAML file with its ``search:`` section.
        overrides: ``key=value`` changes of the baseline configuration.
        **options: :class:`Sweep`'s keywords: ``trials``, ``timeout``, ``storage``, ``study``,
            ``tracking_uri``, ``runs_dir``, ``workers``, ``quiet``, ``lenient``, ``warm_start``,
            ``warm_start_storage``, ``warm_start_top``.

    Returns:
        :class:`SweepResult`: the best value and parameters, the baseline's, the held-out verdict,
        the report's path and where the study and its MLflow runs are.

    Example:
        >>> result = run_sweep("configs/hybrid.yaml", trials=10, quiet=True)
        >>> result.best_value, result.verdict.best["ndcg@10"]
    """
    return Sweep(path, overrides, **options).run()


__all__ = ["Sweep", "SweepResult", "run_sweep"]
