"""One trial: propose, skip repeats, evaluate (in pruning batches if asked), log; whatever it raises
fails this trial only. Functions of the :class:`~sweep.tuning.sweep.Sweep` that runs them."""

from __future__ import annotations

import numpy as np
import optuna

from sweep.cache import CacheWriteError
from sweep.errors import SweepError
from sweep.outputs.render import trial_lines
from sweep.outputs.run_view import applicable, flatten
from sweep.outputs.trial_log import TrialLog
from sweep.pipeline.result import merge_results
from sweep.tuning.context import SweepContext
from sweep.tuning.screening import screen
from sweep.tuning.selection import record_question_values
from sweep.tuning.space import suggest
from sweep.tuning.trials import KIND_ATTR, WORKER_ATTR, best_trial, counts, is_surplus, twin_of
from sweep.tuning.workers import worker_label


class DuplicateTrial(Exception):
    """The sampler proposed a configuration already evaluated (or running): recorded, never re-run."""


def objective(sweep: SweepContext, trial: optuna.Trial) -> float:
    """Evaluate one trial. Its MLflow run is created and filled here but closed only after Optuna has
    recorded the trial (:meth:`_after_trial`); tracking failures never fail the trial.

    The duplicate check reads the trials again once this one's parameters are stored: a snapshot
    from before would miss another worker's trial that suggested the same values meanwhile (both
    would run, one configuration counted twice). Read after, of two such trials the later to check
    always sees the other, and the lower number wins."""
    params = suggest(trial, sweep.search, sweep.baseline_flat)
    twin = twin_of(trial.study.get_trials(deepcopy=False), trial.number, params, sweep.session)
    if twin is not None:
        trial.set_user_attr("duplicate_of", twin.number)
        trial.set_user_attr(KIND_ATTR, "duplicate")
        raise DuplicateTrial(f"repeats trial {twin.number}")
    config = sweep.config_for(params)
    flat = applicable(flatten(config.model_dump(mode="json", exclude={"source"})))
    worker = f"{sweep.identity['host']}:{sweep.identity['pid']}"
    searched = {k: v for k, v in params.items() if k in flat}
    sweep.guard.track(
        "start_trial",
        sweep.parent_id,
        trial.number,
        searched,
        sweep.search.objective,
        {"sweep.worker": worker},
    )
    sweep.pipeline.label = f"{worker_label()}trial {trial.number}"
    screening = screen(sweep, trial, config) if sweep.search.screen else 0.0  # may prune it, unencoded
    metrics = [sweep.search.objective] + [m for m in sweep.search.extra_objectives if m != "latency_ms"]
    result = evaluate(sweep, trial, config, metrics)
    means = result.scores.mean() | {"latency_ms": result.latency_ms}
    value = means[sweep.search.objective]
    trial.set_user_attr("means", {k: float(v) for k, v in means.items()})
    record_question_values(trial, result.scores, sweep.search.objective)  # for the selection estimate
    trial.set_user_attr("seconds", screening + sum(result.timings.values()))
    for warning in result.warnings:
        if warning not in sweep.warned:  # once per sweep: each chunking and model says it once
            sweep.warned.add(warning)
            sweep.say(f"warning: {warning}")
    sweep.guard.track("log_trial", TrialLog.of(trial.number, result, value, means))
    if sweep.search.extra_objectives:
        return (value, *(means[m] for m in sweep.search.extra_objectives))
    return value


def evaluate(sweep: SweepContext, trial: optuna.Trial, config, metrics: list[str]):
    """The whole question set at once; with a pruner, growing batches that report as they go."""
    if sweep.search.pruner == "none":
        result = sweep.pipeline.run(config, metrics)
        trial.set_user_attr("questions_evaluated", len(result.scores.question_ids))
        return result
    n = sweep.pipeline.n_questions(config)
    order = np.random.default_rng(sweep.search.seed).permutation(n)  # same batches for every trial
    parts = []
    for i, rows in enumerate(np.array_split(order, min(sweep.search.pruning_batches, max(n, 1)))):
        parts.append(sweep.pipeline.run(config, metrics, rows=np.sort(rows)))
        partial = merge_results(parts)
        seen = len(partial.scores.question_ids)
        value = partial.scores.mean()[sweep.search.objective]
        trial.report(value, step=seen)
        trial.set_user_attr("questions_evaluated", seen)
        if seen < n and trial.should_prune():
            means = partial.scores.mean() | {"latency_ms": partial.latency_ms}
            trial.set_user_attr("seconds", sum(partial.timings.values()))
            sweep.guard.track("log_trial", TrialLog.of(trial.number, partial, value, means))
            raise optuna.TrialPruned(f"{sweep.search.objective} {value:.4f} after {seen} of {n} questions")
    return partial


def run_trial(sweep: SweepContext, trial: optuna.Trial) -> float:
    """One trial, isolated: whatever it raises fails this trial only, with the reason in Optuna and MLflow."""
    sweep.lock.release()
    if is_surplus(trial.study.get_trials(deepcopy=False), trial.number, sweep.target):
        trial.set_user_attr("surplus", True)
        trial.set_user_attr(KIND_ATTR, "surplus")
        raise SweepError("surplus: the study reached its count while this trial started")
    for key in ("error", KIND_ATTR, "mlflow_run_id", "means"):  # a retry copy's, from the trial it repeats
        if key in trial.user_attrs:
            trial.set_user_attr(key, None)
    # one write: until it lands, a retry copy's old (dead) worker is not taken for this trial's
    trial.set_user_attr(WORKER_ATTR, {**sweep.identity, "trial": trial.number, "session": sweep.session})
    try:
        return objective(sweep, trial)
    except (optuna.TrialPruned, DuplicateTrial):
        raise
    except Exception as e:
        reason = str(e) if isinstance(e, SweepError) else f"{type(e).__name__}: {e}"
        trial.set_user_attr("error", reason[:500])
        trial.set_user_attr(KIND_ATTR, "error")
        if isinstance(e, CacheWriteError):  # every later trial would fail alike: stop with one line
            sweep.fatal = e
        raise


def after_trial(sweep: SweepContext, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """Optuna has recorded the trial: now its run may close (this order keeps MLflow behind Optuna)."""
    state = {optuna.trial.TrialState.COMPLETE: "complete", optuna.trial.TrialState.PRUNED: "pruned"}
    sweep.guard.track(
        "close_trial", trial.number, state.get(trial.state, "failed"), trial.user_attrs.get("error")
    )
    sweep.repeats = sweep.repeats + 1 if trial.user_attrs.get(KIND_ATTR) == "duplicate" else 0
    progress(sweep, study, trial)


def progress(sweep: SweepContext, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    if trial.user_attrs.get(KIND_ATTR) == "surplus":
        return
    trials = study.get_trials(deepcopy=False)  # one read for the count and the best so far
    sweep.done = counts(study, trials=trials).done
    for line in trial_lines(
        trial,
        sweep.done,
        sweep.target,
        best_trial(study, trials),
        sweep.search.objective,
        sweep.search.extra_objectives,
    ):
        sweep.say(line)


def reconnect(sweep: SweepContext, study: optuna.Study) -> None:
    """While MLflow is away, look every few seconds; when it answers, log what it missed."""
    if sweep.guard.back_online():
        sweep.say("MLflow answers again: logging the trials it missed")
        sweep.guard.flush(reconnected=True)
        sweep.recover(study)


__all__ = ["DuplicateTrial", "after_trial", "evaluate", "objective", "progress", "reconnect", "run_trial"]
