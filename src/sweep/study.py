"""The sweep: Optuna searches the configuration space, MLflow records every trial.

Storage is a URL, as in Optuna: the default is an SQLite file under
``runs/<study>/`` so a stopped sweep resumes with the same command; point
``--storage`` at PostgreSQL to share one study between machines. The YAML's
own configuration is enqueued as the first trial (the baseline), and a
parameter set already evaluated is answered from the earlier trial.
"""

from __future__ import annotations

import copy
import math
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import yaml

from .config import apply_overrides, build_config, read_yaml, set_dotted
from .errors import ConfigError, SweepError
from .holdout import Holdout, plan_holdout
from .pipeline import Pipeline, load_dataset
from .plots import study_plots
from .report import write_report
from .space import SearchConfig, grid, parse_search, suggest, when_holds
from .tracking import Tracker, code_version, flatten, ui_command
from .verdict import Verdict, build_verdict, describe_verdict, noise_check


@dataclass
class SweepResult:
    study_name: str
    storage: str
    tracking_uri: str
    best_value: float
    best_params: dict[str, Any]
    baseline_value: float | None
    best_config_yaml: str
    n_complete: int
    failures: list[str] = field(default_factory=list)
    pareto_trials: list[int] = field(default_factory=list)
    verdict: Verdict | None = None  # best vs baseline on the held-out questions
    report_path: Path | None = None


def _sampler(search: SearchConfig):
    if search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=search.seed)
    if search.sampler == "grid":
        return optuna.samplers.GridSampler(grid(search), seed=search.seed)
    return optuna.samplers.TPESampler(seed=search.seed)


def default_paths(study: str, root: Path) -> tuple[str, str]:
    folder = root / study
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(folder / 'optuna.db').resolve()}", f"sqlite:///{(root / 'mlflow.db').resolve()}"


class Sweep:
    def __init__(self, path: str | Path, overrides: list[str] = (), *, trials: int | None = None,
                 timeout: float | None = None, storage: str | None = None, study: str | None = None,
                 tracking_uri: str | None = None, runs_dir: str | Path = "runs", quiet: bool = False):  # fmt: skip
        self.path = Path(path)
        data = apply_overrides(read_yaml(self.path), list(overrides), str(self.path))
        self.search = parse_search(data.pop("search", None), str(self.path))
        data.pop("study", None)
        self.data = data
        self.base = build_config(data, str(self.path), self.path.parent)  # validates the baseline early
        self.holdout: Holdout | None = plan_holdout(self.search.holdout, self.base.dataset,
                                                    lambda: load_dataset(self.base.dataset))  # fmt: skip
        if self.holdout is not None:  # every trial sees the tuning questions only
            self.data["dataset"] = {**self.data["dataset"], **self.holdout.tune}
            self.base = build_config(self.data, str(self.path), self.path.parent)
        self.baseline_flat = flatten(self.base.model_dump(mode="json", exclude={"source"}))
        for name, p in self.search.space.items():
            for key in [name, *p.when, *([p.below] if p.below else [])]:
                if key not in self.baseline_flat:
                    raise ConfigError(str(self.path), f"search.space.{name}", f"{key!r} is not a configuration key")
        self.trials = self.search.trials if trials is None else trials
        self.timeout = timeout or self.search.timeout
        self.study_name = study or self.search.study or self.path.stem
        default_storage, default_tracking = default_paths(self.study_name, Path(runs_dir))
        self.storage = storage or self.search.storage or default_storage
        self.tracking_uri = tracking_uri or self.search.tracking_uri or default_tracking
        self.quiet = quiet
        self.pipeline = Pipeline(self.base.cache_dir, progress=not quiet)
        self.failures: list[str] = []
        self.runs_dir = Path(runs_dir)

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)

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
        params = suggest(trial, self.search, self.baseline_flat)
        done = trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        twin = next((t for t in done if t.params == params and "means" in t.user_attrs), None)
        if twin is not None:
            means = twin.user_attrs["means"]
            trial.set_user_attr("means", means)
            trial.set_user_attr("duplicate_of", twin.number)
            self.tracker.log_trial(self.parent_id, trial.number, params, None, self.search.objective, twin.values[0],
                                   means, {"sweep.duplicate_of": str(twin.number)})  # fmt: skip
            return twin.values[0] if len(twin.values) == 1 else tuple(twin.values)
        config = self.config_for(params)
        metrics = [self.search.objective] + [m for m in self.search.extra_objectives if m != "latency_ms"]
        result = self.pipeline.run(config, metrics)
        means = result.scores.mean() | {"latency_ms": result.latency_ms}
        value = means[self.search.objective]
        trial.set_user_attr("means", {k: float(v) for k, v in means.items()})
        trial.set_user_attr("seconds", sum(result.timings.values()))
        run_id = self.tracker.log_trial(self.parent_id, trial.number, params, result, self.search.objective, value, means)
        trial.set_user_attr("mlflow_run_id", run_id)
        if self.search.extra_objectives:
            return (value, *(means[m] for m in self.search.extra_objectives))
        return value

    def _progress(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self._done += 1
        best = self.best(study)
        best_text = f"best {best.values[0]:.4f} (#{best.number})" if best else "no complete trial yet"
        value = f"{trial.values[0]:.4f}" if trial.values else trial.state.name.lower()
        if trial.values and len(trial.values) > 1:
            value += " " + " ".join(f"{n}={v:.4g}" for n, v in zip(self.search.extra_objectives, trial.values[1:]))
        short = " ".join(f"{k.rsplit('.', 1)[-1]}={v:g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
                         for k, v in trial.params.items())  # fmt: skip
        took = trial.user_attrs.get("seconds")
        self.say(f"[{self._done:>3}/{self.trials}] trial {trial.number:>3} {self.search.objective} {value}  {best_text}"
                 f"  {short}" + (f"  ({took:.2f}s)" if took is not None else "  (same as an earlier trial)"
                                 if "duplicate_of" in trial.user_attrs else ""))  # fmt: skip
        if trial.state == optuna.trial.TrialState.FAIL:
            reason = trial.user_attrs.get("error") or "see the log above"
            self.failures.append(f"trial {trial.number}: {reason}")

    def run(self) -> SweepResult:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(study_name=self.study_name, storage=self.storage, sampler=_sampler(self.search),
                                    directions=self.search.directions, load_if_exists=True)  # fmt: skip
        self.tracker = Tracker(self.tracking_uri, self.study_name)
        tuning_set = self.pipeline.prepare(self.base).eval_set
        dataset_hash = tuning_set.content_hash
        for key, value in {"objective": self.search.objective, "extra_objectives": self.search.extra_objectives,
                           "config": str(self.path)}.items():  # fmt: skip
            study.set_user_attr(key, value)
        self.parent_id = self.tracker.parent(self.study_name, {"sweep.config": str(self.path), "sweep.code_version": code_version(),
                                                             "sweep.objective": self.search.objective,
                                                             "sweep.dataset_hash": dataset_hash})  # fmt: skip
        if not study.trials:
            study.enqueue_trial(self.baseline_params(), user_attrs={"baseline": True})
        finished = len([t for t in study.trials if t.state.is_finished()])
        self.say(f"study {self.study_name!r}: {finished} trial(s) so far; running {self.trials} more"
                 f" (objective {self.search.objective}, {self.search.direction})\n  storage {self.storage}")  # fmt: skip
        self.say(f"  tuning on {len(tuning_set.questions)} questions; "
                 + (self.holdout.description if self.holdout else "no held-out questions (search.holdout.fraction: 0)"))  # fmt: skip
        self._done = 0
        self._stop_requested = False
        interrupted = False
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            for sig in previous:
                signal.signal(sig, self._request_stop)
        try:
            study.optimize(self._guarded, n_trials=self.trials, timeout=self.timeout,
                           callbacks=[self._progress, self._maybe_stop], catch=(SweepError,))  # fmt: skip
        except KeyboardInterrupt:
            interrupted = True
        finally:
            if in_main:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        return self.finish(study, interrupted or self._stop_requested)

    def _request_stop(self, signum, frame) -> None:
        """First Ctrl-C (or SIGTERM): finish and log the current trial, then stop. Second: stop now."""
        if self._stop_requested:
            raise KeyboardInterrupt
        self._stop_requested = True
        print(f"\n{signal.Signals(signum).name}: finishing the current trial, then stopping "
              "(press Ctrl-C again to stop at once)", flush=True)  # fmt: skip

    def _maybe_stop(self, study: optuna.Study, trial) -> None:
        if self._stop_requested:
            study.stop()

    def _guarded(self, trial: optuna.Trial) -> float:
        try:
            return self.objective(trial)
        except SweepError as e:
            trial.set_user_attr("error", str(e)[:500])
            raise

    def finish(self, study: optuna.Study, interrupted: bool) -> SweepResult:
        complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
        if not complete:
            raise SweepError(f"study {self.study_name!r} has no complete trial")
        best = self.best(study)
        baseline = next((t for t in complete if t.user_attrs.get("baseline")), None)
        best_config = self.config_for(best.params)
        best_yaml = yaml.safe_dump(best_config.model_dump(mode="json", exclude={"source"}), sort_keys=False)
        summary = {"best_objective": best.values[0], "best_trial": best.number, "complete_trials": len(complete)}
        if baseline is not None:
            summary["baseline_objective"] = baseline.values[0]
        for k, v in best.user_attrs.get("means", {}).items():
            summary[f"best_{k.replace('@', '_at_')}"] = v
        verdict = self.final_verdict(study, best) if self.holdout else None
        if verdict is not None:
            summary.update(verdict.mlflow_metrics())
            study.set_user_attr("verdict", verdict.to_json())
        files: dict[str, bytes | str] = {"best_config.yaml": best_yaml}
        plots = study_plots(study, self.search.objective, self.search.extra_objectives)
        files.update(plots)
        report = write_report(study, self.runs_dir / self.study_name / "report.html", plots=plots)
        files["report.html"] = report.read_bytes()
        if verdict is not None:
            files["diagnosis.txt"] = describe_verdict(verdict) + "\n"
        self.tracker.finish_parent(self.parent_id, summary, files)
        pareto = [t.number for t in study.best_trials] if self.search.extra_objectives else [best.number]
        result = SweepResult(self.study_name, self.storage, self.tracking_uri, best.values[0], best.params,
                             baseline.values[0] if baseline else None, best_yaml, len(complete), self.failures,
                             pareto, verdict, report)  # fmt: skip
        self.say(describe_sweep(result, self.search.objective))
        if interrupted:
            self.say("\ninterrupted: the finished trials are saved. Resume with the same command, e.g.\n"
                     f"  python -m sweep {self.path} --study {self.study_name} --storage {self.storage}")  # fmt: skip
        return result

    def final_verdict(self, study: optuna.Study, best: optuna.trial.FrozenTrial) -> Verdict:
        """Best and baseline on the held-out questions; best against the runner-up on the tuning ones."""
        metrics = [self.search.objective]
        self.say("\nevaluating the best and the baseline configurations on the held-out questions")
        held_best = self.pipeline.run(self.config_for(best.params, heldout=True), metrics)
        held_base = self.pipeline.run(self.config_for(self.baseline_params(), heldout=True), metrics)
        runner = self.runner_up(study, best)
        noise = None
        if runner is not None:  # both are cached stages: this costs metric time only
            noise = noise_check(self.pipeline.run(self.config_for(best.params), metrics),
                                self.pipeline.run(self.config_for(runner.params), metrics), self.search.objective)  # fmt: skip
        return build_verdict(held_best, held_base, objective=self.search.objective, split=self.holdout.description,
                             best_trial=best.number, noise=noise, runner_up_trial=runner.number if runner else None,
                             best_is_baseline=best.params == self.baseline_params())  # fmt: skip

    def runner_up(self, study: optuna.Study, best: optuna.trial.FrozenTrial) -> optuna.trial.FrozenTrial | None:
        sign = 1 if self.search.direction == "maximize" else -1
        others = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                  if t.params != best.params]  # fmt: skip
        return max(others, key=lambda t: (sign * t.values[0], -t.number)) if others else None

    def best(self, study: optuna.Study) -> optuna.trial.FrozenTrial | None:
        """The best trial on the primary objective (with several objectives, the Pareto front's best on it)."""
        complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if not complete:
            return None
        pool = study.best_trials if len(self.search.directions) > 1 else complete
        sign = 1 if self.search.direction == "maximize" else -1
        return max(pool, key=lambda t: (sign * t.values[0], -t.number))

def describe_sweep(result: SweepResult, objective: str) -> str:
    lines = [
        "",
        f"best trial: {objective} = {result.best_value:.4f}"
        + (f"  (baseline {result.baseline_value:.4f}, {result.best_value - result.baseline_value:+.4f})"
           if result.baseline_value is not None and not math.isnan(result.baseline_value) else ""),  # fmt: skip
    ]
    lines += [f"  {k} = {v}" for k, v in result.best_params.items()]
    if len(result.pareto_trials) > 1:
        lines.append(f"Pareto front: trials {', '.join(map(str, sorted(result.pareto_trials)))}")
    if result.failures:
        lines.append(f"{len(result.failures)} failed trial(s):")
        lines += [f"  {f}" for f in result.failures]
    if result.verdict is not None:
        lines += ["", describe_verdict(result.verdict), ""]
    lines += [f"{result.n_complete} complete trials in study {result.study_name!r}",
              f"open the MLflow UI on this store:  {ui_command(result.tracking_uri)}"]  # fmt: skip
    if result.report_path is not None:
        lines.append(f"report: {result.report_path}")
    return "\n".join(lines)


def run_sweep(path: str | Path, overrides: list[str] = (), **options) -> SweepResult:
    return Sweep(path, overrides, **options).run()


def report_study(study_name: str, *, storage: str | None = None, tracking_uri: str | None = None,
                 out: str | Path | None = None, runs_dir: str | Path = "runs") -> Path:  # fmt: skip
    """``sweep report STUDY``: rebuild the HTML report from the storage; attach it to the parent run if found."""
    root = Path(runs_dir)
    if storage is None:
        db = root / study_name / "optuna.db"
        if not db.exists():
            raise SweepError(f"no study {study_name!r} under {root}/ (looked for {db}); run the sweep first, "
                             "or pass --storage URL")  # fmt: skip
        storage = f"sqlite:///{db.resolve()}"
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise SweepError(f"no study {study_name!r} in {storage} (it has: {', '.join(names) or 'none'})") from None
    path = write_report(study, Path(out) if out else root / study_name / "report.html")
    tracking_uri = tracking_uri or f"sqlite:///{(root / 'mlflow.db').resolve()}"
    if not tracking_uri.startswith("sqlite:///") or Path(tracking_uri.removeprefix("sqlite:///")).exists():
        tracker = Tracker(tracking_uri, study_name)
        parent = tracker.find_parent(study_name)
        if parent is not None:
            tracker.client.log_artifact(parent, str(path))
    return path


__all__ = ["Sweep", "SweepResult", "report_study", "run_sweep"]
