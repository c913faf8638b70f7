"""The sweep: Optuna searches the configuration space, MLflow records every trial.

Storage is a URL, as in Optuna: the default is an SQLite file under
``runs/<study>/`` so a stopped sweep resumes with the same command; point
``--storage`` at PostgreSQL to share one study between machines. The YAML's
own configuration is enqueued as the first trial (the baseline), and a
parameter set already evaluated is answered from the earlier trial.
"""

from __future__ import annotations

import copy
import logging
import os
import random
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from .cache import CacheWriteError
from .config import apply_overrides, blame_overrides, build_config, check_cache_dir, read_yaml, set_dotted
from .errors import ConfigError, SweepError, mask_url
from .finish import SweepResult, finish
from .holdout import Holdout, plan_holdout
from .pipeline import Pipeline, load_dataset
from .reconcile import TrackingGuard
from .render import dropped_lines, trial_lines
from .result import merge_results
from .space import (
    SearchConfig,
    check_objectives,
    check_space,
    check_study_name,
    default_study_name,
    parse_search,
    suggest,
    when_holds,
)
from .storage import (
    HOST_ATTR,
    PID_ATTR,
    TRIAL_ATTR,
    close_storage,
    embedded_stores,
    fail_dead_trials,
    open_study,
    sqlite_url,
    worker_identity,
)
from .tracking import Tracker, TrackingUnavailable, applicable, code_version, flatten, trials_view_state
from .trials import KIND_ATTR, SESSION_ATTR, counts, fresh_params, is_surplus, space_size, twin_of
from .verdict import best_trial
from .workers import SESSION_ENV, STORAGE_ENV, TRACKING_ENV, AskLock, signal_all, spawn_workers, worker_label

REPEAT_LIMIT = 100  # proposals in a row that repeat evaluated configurations: the space is exhausted


class DuplicateTrial(Exception):
    """The sampler proposed a configuration already evaluated (or running): recorded, never re-run."""


class _NoTrialFailureWarnings(logging.Filter):
    """Optuna logs every failed trial with its traceback; the sweep prints one line of its own instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return " failed with " not in record.getMessage()


class Sweep:
    def __init__(self, path: str | Path, overrides: list[str] = (), *, trials: int | None = None,
                 timeout: float | None = None, storage: str | None = None, study: str | None = None,
                 tracking_uri: str | None = None, runs_dir: str | Path = "runs", quiet: bool = False,
                 workers: int = 1, worker_only: bool = False, lenient: bool = False):  # fmt: skip
        self.path = Path(path)
        self.overrides = list(overrides)
        self.workers, self.worker_only = workers, worker_only
        if worker_only:  # a spawned worker: its parent's URLs, passed in the environment
            storage, tracking_uri = storage or os.environ.get(STORAGE_ENV), tracking_uri or os.environ.get(TRACKING_ENV)
        data = apply_overrides(read_yaml(self.path), list(overrides), str(self.path))
        self.search = parse_search(data.pop("search", None), str(self.path))
        self.data = data  # any other top-level key is an error in build_config (a stray `study:` too)
        try:
            self.base = build_config(data, str(self.path), self.path.parent)  # validates the baseline early
        except ConfigError as e:
            raise blame_overrides(e, self.overrides) from None
        try:
            self.holdout: Holdout | None = plan_holdout(self.search.holdout, self.base.dataset,
                                                        self._load_baseline_dataset)  # fmt: skip
        except ConfigError as e:
            raise e.located(str(self.path)) from None
        if self.holdout is not None:  # every trial sees the tuning questions only
            self.data["dataset"] = {**self.data["dataset"], **self.holdout.tune}
            self.base = build_config(self.data, str(self.path), self.path.parent)
        self.baseline_flat = flatten(self.base.model_dump(mode="json", exclude={"source"}))
        for name, p in self.search.space.items():
            for key in [name, *p.when, *([p.below] if p.below else [])]:
                if key not in self.baseline_flat:
                    raise ConfigError(str(self.path), f"search.space.{name}", f"{key!r} is not a configuration key")
        self._check_values()
        check_objectives(self.search, self.base.retrieval.top_k, self.base.evaluation.ks, str(self.path))
        self.trials = self.search.trials if trials is None else trials
        self.timeout = timeout or self.search.timeout
        self.study_name = check_study_name(study) if study is not None else self.search.study or default_study_name(self.path.stem)
        check_cache_dir(self.base)
        optuna_db, mlflow_db = embedded_stores(self.study_name, Path(runs_dir))
        optuna_db.parent.mkdir(parents=True, exist_ok=True)  # also holds the report and the workers' lock
        self._default_storage = sqlite_url(optuna_db)
        self.storage = storage or self.search.storage or self._default_storage
        self.tracking_uri = tracking_uri or self.search.tracking_uri or sqlite_url(mlflow_db)
        self.tracking_option = "search.tracking_uri" if not tracking_uri and self.search.tracking_uri else "--tracking-uri"
        self.session = os.environ.get(SESSION_ENV) or uuid.uuid4().hex[:12]
        self._space: tuple[SearchConfig, int | None] | None = None
        self.quiet = quiet
        self.pipeline = Pipeline(self.base.cache_dir, lenient=lenient, progress=not quiet)
        self.lenient = lenient
        self.failures: list[str] = []
        self.runs_dir = Path(runs_dir)

    @property
    def space_total(self) -> int | None:
        """Distinct configurations in the space (None: unbounded); an empty space holds the baseline only."""
        if self._space is None or self._space[0] is not self.search:
            self._space = (self.search, space_size(self.search, self.baseline_flat) if self.search.space else 1)
        return self._space[1]

    @property
    def target(self) -> int:
        """The study's size: the trials asked for, or every configuration of a smaller space."""
        total = self.space_total
        return self.trials if total is None else min(self.trials, total)

    def _load_baseline_dataset(self):
        try:
            return load_dataset(self.base.dataset)
        except ConfigError as e:
            raise e.located(str(self.path)) from None

    def _check_values(self) -> None:
        def problem(params: dict) -> str | None:
            try:
                self.config_for(params)
                return None
            except ConfigError as e:
                return e.message

        check_space(self.search, self.baseline_params(), problem, str(self.path))

    def say(self, text: str) -> None:
        if not self.quiet:
            print(worker_label() + text if text.strip() else text, flush=True)

    def config_for(self, params: dict[str, Any], heldout: bool = False):
        """The configuration of a trial; ``heldout`` swaps the tuning questions for the held-out ones."""
        data = copy.deepcopy(self.data)
        for k, v in params.items():
            set_dotted(data, k, v, str(self.path))
        if heldout:
            data["dataset"] = {k: v for k, v in data["dataset"].items() if k not in ("split", "holdout")}
            data["dataset"].update(self.holdout.heldout)
        return build_config(data, str(self.path), self.path.parent)

    def baseline_params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, p in self.search.space.items():
            current = {**self.baseline_flat, **out}
            if all(when_holds(current.get(k), v) for k, v in p.when.items()):
                out[name] = self.baseline_flat[name]
        return out

    def objective(self, trial: optuna.Trial) -> float:
        """Evaluate one trial. Its MLflow run is created and filled here but closed only after Optuna has
        recorded the trial (:meth:`_after_trial`); tracking failures never fail the trial."""
        params = suggest(trial, self.search, self.baseline_flat)
        twin = twin_of(trial.study, trial.number, params, self.session)
        if twin is not None:
            trial.set_user_attr("duplicate_of", twin.number)
            trial.set_user_attr(KIND_ATTR, "duplicate")
            raise DuplicateTrial(f"repeats trial {twin.number}")
        config = self.config_for(params)
        flat = applicable(flatten(config.model_dump(mode="json", exclude={"source"})))
        worker = f"{self.identity[HOST_ATTR]}:{self.identity[PID_ATTR]}"
        run_id = self.guard.call(self.tracker.start_trial, self.parent_id, trial.number,
                                 {k: v for k, v in params.items() if k in flat}, self.search.objective,
                                 {"sweep.worker": worker})  # fmt: skip
        trial.set_user_attr("mlflow_run_id", run_id)
        self.pipeline.label = f"{worker_label()}trial {trial.number}"
        metrics = [self.search.objective] + [m for m in self.search.extra_objectives if m != "latency_ms"]
        result = self.evaluate(trial, config, metrics, run_id)
        means = result.scores.mean() | {"latency_ms": result.latency_ms}
        value = means[self.search.objective]
        trial.set_user_attr("means", {k: float(v) for k, v in means.items()})
        trial.set_user_attr("seconds", sum(result.timings.values()))
        for warning in result.warnings:
            if warning not in self._warned:  # once per sweep: each chunking and model says it once
                self._warned.add(warning)
                self.say(f"warning: {warning}")
        if run_id:
            self.guard.call(self.tracker.log_trial, run_id, trial.number, result, value, means)
        if self.search.extra_objectives:
            return (value, *(means[m] for m in self.search.extra_objectives))
        return value

    def evaluate(self, trial: optuna.Trial, config, metrics: list[str], run_id: str | None):
        """The whole question set at once; with a pruner, growing batches that report as they go."""
        if self.search.pruner == "none":
            result = self.pipeline.run(config, metrics)
            trial.set_user_attr("questions_evaluated", len(result.scores.question_ids))
            return result
        n = self.pipeline.n_questions(config)
        order = np.random.default_rng(self.search.seed).permutation(n)  # same batches for every trial
        parts = []
        for i, rows in enumerate(np.array_split(order, min(self.search.pruning_batches, max(n, 1)))):
            parts.append(self.pipeline.run(config, metrics, rows=np.sort(rows)))
            partial = merge_results(parts)
            seen = len(partial.scores.question_ids)
            value = partial.scores.mean()[self.search.objective]
            trial.report(value, step=seen)
            trial.set_user_attr("questions_evaluated", seen)
            if seen < n and trial.should_prune():
                means = partial.scores.mean() | {"latency_ms": partial.latency_ms}
                trial.set_user_attr("seconds", sum(partial.timings.values()))
                if run_id:
                    self.guard.call(self.tracker.log_trial, run_id, trial.number, partial, value, means)
                raise optuna.TrialPruned(f"{self.search.objective} {value:.4f} after {seen} of {n} questions")
        return partial

    def _reconnect(self, study: optuna.Study) -> None:
        """While MLflow is away, look every few seconds; when it answers, log what it missed."""
        if self.guard.back_online():
            self.say("MLflow answers again: logging the trials it missed")
            self.recover(study)

    def _progress(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.user_attrs.get(KIND_ATTR) == "surplus":
            return
        self._done = counts(study).done
        for line in trial_lines(trial, self._done, self.target, best_trial(study), self.search.objective,
                                self.search.extra_objectives):  # fmt: skip
            self.say(line)

    def run(self) -> SweepResult | None:
        import sqlalchemy.exc

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        logging.getLogger("optuna.study._optimize").addFilter(_NoTrialFailureWarnings())
        try:
            study, _ = open_study(self.study_name, self.storage, self.search, self.baseline_params(),
                                  self.runs_dir / self.study_name / ".ask.lock")
        except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as e:
            option = "--storage" if self.storage != self._default_storage else "the embedded store"
            reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise SweepError(f"{option} {mask_url(self.storage)}: cannot open the study ({reason}); check the URL "
                             "and that the database is running") from None  # fmt: skip
        try:
            return self._run(study)
        finally:
            close_storage(study)  # a notebook may run many sweeps: each would keep database connections open

    def _run(self, study: optuna.Study) -> SweepResult | None:
        self.tracker = Tracker(self.tracking_uri, self.study_name, self.search.tracking_retry_seconds,
                               self.tracking_option)  # fmt: skip
        self.guard = TrackingGuard(self.tracker, self.say, self.search.tracking_retry_seconds)
        self._repeats, self._fatal = 0, None
        self._warned: set[str] = set()
        self._rng = random.Random(f"{self.search.seed}:{self.session}:{os.getpid()}")
        self.identity = worker_identity()  # this process, as recorded on each trial it runs
        tuning_set = self.pipeline.prepare(self.base).eval_set
        if not self.worker_only:
            for key, value in {"objective": self.search.objective, "extra_objectives": self.search.extra_objectives,
                               "config": str(self.path)}.items():  # fmt: skip
                study.set_user_attr(key, value)
        try:
            self.parent_id = self.tracker.parent(self.study_name, {"sweep.config": str(self.path), "sweep.code_version": code_version(),
                                                                 "sweep.objective": self.search.objective,
                                                                 "sweep.dataset_hash": tuning_set.content_hash})  # fmt: skip
        except TrackingUnavailable as e:
            raise SweepError(f"{self.tracking_option} {mask_url(self.tracking_uri)}: {e}") from None
        extra = [m for m in self.search.extra_objectives]
        self.view_key = self.guard.call(self.tracker.share_view, trials_view_state(list(self.search.space), extra))
        self.recover(study)
        c = counts(study)
        self.say(f"study {self.study_name!r}: {c.done} of {self.target} trials done"
                 f" (objective {self.search.objective}, {self.search.direction}"
                 f"{', ' + str(self.workers) + ' workers' if self.workers > 1 else ''})\n  storage {mask_url(self.storage)}")  # fmt: skip
        if not self.worker_only:
            unjudged = len(tuning_set.answerable(self.base.dataset.relevance_threshold)[1])
            self.say(f"  tuning on {len(tuning_set.questions)} questions"
                     + (f" ({unjudged} without relevant evidence, excluded from the means)" if unjudged else "") + "; "
                     + (self.holdout.description if self.holdout else "no held-out questions (search.holdout.fraction: 0)"))  # fmt: skip
            for line in dropped_lines(tuning_set.dropped):
                self.say("  " + line)
            if self.space_total is not None and self.space_total < self.trials:
                self.say(f"  the search space holds {self.space_total} configuration(s): the study ends after "
                         f"{self.space_total}, not {self.trials}")  # fmt: skip
        self._done = c.done
        self._stop_requested = False
        self._procs = (spawn_workers(self.workers - 1, self.worker_argv(), self.session, self.storage, self.tracking_uri)
                       if self.workers > 1 else [])  # fmt: skip
        interrupted = False
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            for sig in previous:
                signal.signal(sig, self._request_stop)
        started = time.perf_counter()
        try:
            self.work(study)
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
        failed = fail_dead_trials(study, self.search.retries, self.search.grace_period)
        fixed = self.guard.reconcile(study, self.parent_id, self.search.objective,
                                     lambda params: self.config_for(params).model_dump(mode="json", exclude={"source"}))  # fmt: skip
        if failed or fixed:
            parts = [f"trial(s) {', '.join(map(str, failed))} of dead workers marked failed"
                     + (" and re-queued" if self.search.retries else "")] if failed else []  # fmt: skip
            self.say("recovered: " + "; ".join(parts + ([fixed.describe()] if fixed else [])))

    def worker_argv(self) -> list[str]:
        # the URLs travel in the environment (URLS_ENV), not on the command line, where `ps` shows any password
        argv = [str(self.path), *self.overrides, "--study", self.study_name, "--trials", str(self.trials),
                "--runs-dir", str(self.runs_dir)]  # fmt: skip
        if self.timeout:
            argv += ["--timeout", str(self.timeout)]
        return argv + (["--lenient"] if self.lenient else [])

    def work(self, study: optuna.Study) -> None:
        """Run trials until the study has its count; wait for others' last trials, which may be retried here."""
        started = time.monotonic()
        lock = AskLock(self.runs_dir / self.study_name / ".ask.lock")
        self._lock = lock
        while not self._stop_requested and self._fatal is None:
            if self.timeout and time.monotonic() - started > self.timeout:
                break
            self._reconnect(study)
            lock.acquire()  # held from "is another trial needed?" until the trial exists (_guarded releases it)
            try:
                # a local worker that died: at once, not after the grace
                fail_dead_trials(study, self.search.retries, self.search.grace_period)
                c = counts(study, self.session)
                if c.done >= self.target:
                    if self.target < self.trials and not self.worker_only:
                        self.say(f"stopping: all {self.target} configurations of the search space are evaluated "
                                 f"({self.trials} trials were asked for); widen the space to search further")  # fmt: skip
                    break
                if self._repeats >= REPEAT_LIMIT:
                    self.say(f"stopping: the sampler proposed {REPEAT_LIMIT} already evaluated configurations in a "
                             f"row; the space looks exhausted at {c.done} distinct configurations")  # fmt: skip
                    break
                if c.failed >= max(5, 2 * self.trials):
                    self.say(f"stopping: {c.failed} trials failed in this run (see the reasons above); fix the "
                             "cause and run the same command again: the study continues where it stopped")  # fmt: skip
                    break
                others_finishing = c.done + c.running >= self.target
                if not others_finishing and self._repeats and not self._waiting(study):
                    fresh = fresh_params(study, self.search, self.baseline_flat, self._rng)
                    if fresh is None:
                        self.say(f"stopping: every configuration of the search space is evaluated ({c.done})")
                        break
                    study.enqueue_trial(fresh, user_attrs={"sweep.fresh": True})  # the next trial is a new one
                if not others_finishing:
                    study.optimize(self._guarded, n_trials=1, callbacks=[self._after_trial], catch=(Exception,))
            finally:
                lock.release()
            if others_finishing:  # the last trials are someone else's: wait, they may die and be re-queued
                self._say_waiting(study)
                for proc in self._procs:
                    proc.poll()  # reap a dead worker so its pid reads as gone
                time.sleep(min(2.0, self.search.heartbeat_interval))
                fail_dead_trials(study, self.search.retries, self.search.grace_period)

    def _say_waiting(self, study: optuna.Study) -> None:
        """Once per set of trials waited for: a silent wait looks like a hang."""
        running = tuple(t.number for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))
        if running and running != getattr(self, "_waited_for", None):
            self._waited_for = running
            self.say(f"waiting for trial(s) {', '.join(map(str, running))} of other workers (a dead worker's "
                     f"trial is failed and re-queued after {self.search.grace_period} s without a heartbeat)")

    @staticmethod
    def _waiting(study: optuna.Study) -> bool:
        return bool(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))

    def _request_stop(self, signum, frame) -> None:
        """First Ctrl-C (or SIGTERM): finish and log the current trial, then stop. Second: stop now."""
        if self._stop_requested:
            raise KeyboardInterrupt
        self._stop_requested = True
        if signum == signal.SIGTERM:  # Ctrl-C reaches the whole process group; SIGTERM only us
            signal_all(getattr(self, "_procs", []), signum)
        print(f"\n{worker_label()}{signal.Signals(signum).name}: finishing the current trial, then stopping "
              "(press Ctrl-C again to stop at once)", flush=True)  # fmt: skip

    def _guarded(self, trial: optuna.Trial) -> float:
        """One trial, isolated: whatever it raises fails this trial only, with the reason in Optuna and MLflow."""
        self._lock.release()
        if is_surplus(trial.study, trial.number, self.target):
            trial.set_user_attr("surplus", True)
            trial.set_user_attr(KIND_ATTR, "surplus")
            raise SweepError("surplus: the study reached its count while this trial started")
        stale = {k: None for k in ("error", KIND_ATTR, "mlflow_run_id", "means") if k in trial.user_attrs}
        # the trial number last: until it is set, a retry copy's old (dead) pid is not taken for this trial's
        for key, value in {**self.identity, SESSION_ATTR: self.session, **stale, TRIAL_ATTR: trial.number}.items():
            trial.set_user_attr(key, value)
        try:
            return self.objective(trial)
        except (optuna.TrialPruned, DuplicateTrial):
            raise
        except Exception as e:
            reason = str(e) if isinstance(e, SweepError) else f"{type(e).__name__}: {e}"
            trial.set_user_attr("error", reason[:500])
            trial.set_user_attr(KIND_ATTR, "error")
            if isinstance(e, CacheWriteError):  # every later trial would fail alike: stop with one line
                self._fatal = e
            raise

    def _after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        """Optuna has recorded the trial: now its run may close (this order keeps MLflow behind Optuna)."""
        run_id = trial.user_attrs.get("mlflow_run_id")
        if run_id:
            state = {optuna.trial.TrialState.COMPLETE: "complete", optuna.trial.TrialState.PRUNED: "pruned"}
            self.guard.call(self.tracker.end_trial, run_id, state.get(trial.state, "failed"), trial.user_attrs.get("error"))
        self._repeats = self._repeats + 1 if trial.user_attrs.get(KIND_ATTR) == "duplicate" else 0
        self._progress(study, trial)

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
