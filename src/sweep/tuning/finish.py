"""The end of a sweep: the best trial, its held-out verdict, artifacts, the report and the summary.

Runs in the process that started the sweep once the study has its count (or was stopped); it first
makes MLflow agree with Optuna, so the summary and the parent run describe exactly the trials there are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import yaml

from sweep.analysis.judgments import judged_warning
from sweep.analysis.selection import SelectionEstimate
from sweep.analysis.verdict import Verdict, build_verdict, describe_verdict, noise_check
from sweep.errors import SweepError, mask_url
from sweep.outputs.plots import study_plots
from sweep.outputs.render import describe_sweep
from sweep.outputs.run_view import mlflow_name, verdict_metrics
from sweep.tuning.context import SweepContext
from sweep.tuning.objective import reconnect
from sweep.tuning.report import write_report
from sweep.tuning.selection import study_selection
from sweep.tuning.trials import KIND_ATTR, best_of, best_trial

BEST_CONFIG_ATTR = "best_config"


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
    experiment_id: str = "0"
    view_key: str | None = (
        None  # MLflow's shared view of the trials, with objective and parameters as columns
    )
    selection: SelectionEstimate | None = None  # the best trial's score corrected for having picked it


def finish(sweep: SweepContext, study: optuna.Study, interrupted: bool) -> SweepResult:
    """The end of a sweep: best trial, held-out verdict, artifacts, report, the summary printed.

    Args:
        sweep: the :class:`~sweep.study.Sweep` that ran the study.
        study: its Optuna study.
        interrupted: whether a signal stopped it (the summary says how to resume).

    Returns:
        The :class:`SweepResult`.
    """
    sweep.guard.last_probe = 0.0  # one more look before the summary, if MLflow was away
    reconnect(sweep, study)
    sweep.recover(study)
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    sweep.failures = [
        f"trial {t.number}: {t.user_attrs.get('error', 'no reason recorded')}"
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))
        if t.user_attrs.get(KIND_ATTR) not in ("surplus", "duplicate")
    ]
    if not complete:
        raise SweepError(
            f"study {sweep.study_name!r} has no complete trial"
            + ("; failures:\n  " + "\n  ".join(sweep.failures[-10:]) if sweep.failures else "")
        )
    best = best_trial(study)
    baseline = next((t for t in complete if t.user_attrs.get("baseline")), None)
    best_config = sweep.config_for(best.params)
    best_yaml = yaml.safe_dump(best_config.model_dump(mode="json", exclude={"source"}), sort_keys=False)
    study.set_user_attr(
        BEST_CONFIG_ATTR, {"trial": best.number, "yaml": best_yaml}
    )  # what `sweep export` reads
    summary = {"best_objective": best.values[0], "best_trial": best.number, "complete_trials": len(complete)}
    if baseline is not None:
        summary["baseline_objective"] = baseline.values[0]
    for k, v in best.user_attrs.get("means", {}).items():
        summary[f"best_{mlflow_name(k)}"] = v
    selection = study_selection(study, sweep.search.seed)
    if selection is not None:
        study.set_user_attr("selection", selection.to_json())  # what the report shows
        summary.update(
            {
                "best_objective_selection_corrected": selection.corrected,
                "best_objective_selection_low": selection.low,
                "best_objective_selection_high": selection.high,
            }
        )
    verdict = final_verdict(sweep, study, best) if sweep.holdout else None
    if verdict is not None:
        summary.update(verdict_metrics(verdict))
        study.set_user_attr("verdict", verdict.to_json())
    files: dict[str, bytes | str] = {"best_config.yaml": best_yaml}
    plots = study_plots(study, sweep.search.objective, sweep.search.extra_objectives)
    files.update(plots)
    report = write_report(study, sweep.runs_dir / sweep.study_name / "report.html", plots=plots)
    files["report.html"] = report.read_bytes()
    if verdict is not None:
        files["diagnosis.txt"] = describe_verdict(verdict) + "\n"
    sweep.guard.call(sweep.tracker.finish_parent, sweep.parent_id, summary, files)
    for trial in {t.number: t for t in (best, baseline) if t is not None}.values():  # the runs people open
        if run_id := sweep.guard.call(sweep.tracker.trial_run, sweep.parent_id, trial.number):
            sweep.guard.call(sweep.tracker.log_recall_plot, run_id, f"trial {trial.number}")
    pareto = [t.number for t in study.best_trials] if sweep.search.extra_objectives else [best.number]
    result = SweepResult(
        sweep.study_name,
        sweep.storage,
        sweep.tracking_uri,
        best.values[0],
        best.params,
        baseline.values[0] if baseline else None,
        best_yaml,
        len(complete),
        sweep.failures,
        pareto,
        verdict,
        report,
        sweep.tracker.experiment_id,
        sweep.view_key,
        selection,
    )
    sweep.say(describe_sweep(result, sweep.search.objective))
    _, labels = sweep.pipeline.prepare(sweep.config_for(best.params)).served
    nonrelevant = int(labels.n_nonrelevant().sum())
    if warning := judged_warning(best.user_attrs.get("means", {}), nonrelevant, sweep.search.objective):
        sweep.say(warning)
    if sweep.tracker.offline:
        sweep.say(
            f"\nwarning: MLflow at {mask_url(sweep.tracking_uri)} did not answer: some trials and the summary "
            "are not logged there yet. Nothing is lost: run the same command again once it answers, and "
            "it logs them without recomputing anything"
        )
    if interrupted:
        sweep.say(
            "\ninterrupted: the finished trials are saved. Resume with the same command, e.g.\n"
            f"  python -m sweep {sweep.path} --study {sweep.study_name} --storage {mask_url(sweep.storage)}"
        )
    return result


def final_verdict(sweep, study: optuna.Study, best: optuna.trial.FrozenTrial) -> Verdict:
    """Best and baseline on the held-out questions; best against the runner-up on the tuning ones."""
    metrics = [sweep.search.objective]
    sweep.say("\nevaluating the best and the baseline configurations on the held-out questions")
    held_best = sweep.pipeline.run(sweep.config_for(best.params, heldout=True), metrics)
    held_base = sweep.pipeline.run(sweep.config_for(sweep.baseline_params(), heldout=True), metrics)
    runner = runner_up(sweep, study, best)
    noise = None
    if runner is not None:  # both are cached stages: this costs metric time only
        noise = noise_check(
            sweep.pipeline.run(sweep.config_for(best.params), metrics),
            sweep.pipeline.run(sweep.config_for(runner.params), metrics),
            sweep.search.objective,
        )
    return build_verdict(
        held_best,
        held_base,
        objective=sweep.search.objective,
        split=sweep.holdout.description,
        best_trial=best.number,
        noise=noise,
        runner_up_trial=runner.number if runner else None,
        best_is_baseline=best.params == sweep.baseline_params(),
    )


def runner_up(sweep, study: optuna.Study, best: optuna.trial.FrozenTrial) -> optuna.trial.FrozenTrial | None:
    others = [
        t
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if t.params != best.params
    ]
    return best_of(others, sweep.search.direction == "maximize")
