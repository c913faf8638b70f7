"""The worker loop: take the ask lock, decide whether the study needs another trial, run it, and wait
for other workers' last trials (which may die and be re-queued); Ctrl-C and SIGTERM stop it cleanly."""

from __future__ import annotations

import signal
import time

import optuna

from sweep.tuning.context import SweepContext
from sweep.tuning.objective import after_trial, reconnect, run_trial
from sweep.tuning.trials import counts, fresh_params
from sweep.tuning.workers import AskLock, signal_all

REPEAT_LIMIT = 100  # proposals in a row that repeat evaluated configurations: the space is exhausted


def work(sweep: SweepContext, study: optuna.Study) -> None:
    """Run trials until the study has its count; wait for others' last trials, which may be retried here."""
    started = time.monotonic()
    lock = AskLock(sweep.runs_dir / sweep.study_name / ".ask.lock")
    sweep.lock = lock
    while not sweep.stop_requested and sweep.fatal is None:
        if sweep.timeout and time.monotonic() - started > sweep.timeout:
            break
        reconnect(sweep, study)
        lock.acquire()  # held from "is another trial needed?" until the trial exists (_guarded releases it)
        try:
            sweep.fail_dead(study)  # a local worker that died: at once, not after the grace
            c = counts(study, sweep.session)
            if c.done >= sweep.target:
                if sweep.target < sweep.trials and not sweep.worker_only:
                    sweep.say(
                        f"stopping: all {sweep.target} configurations of the search space are evaluated "
                        f"({sweep.trials} trials were asked for); widen the space to search further"
                    )
                break
            if sweep.repeats >= REPEAT_LIMIT:
                sweep.say(
                    f"stopping: the sampler proposed {REPEAT_LIMIT} already evaluated configurations in a "
                    f"row; the space looks exhausted at {c.done} distinct configurations"
                )
                break
            if c.failed >= max(5, 2 * sweep.trials):
                sweep.say(
                    f"stopping: {c.failed} trials failed in this run (see the reasons above); fix the "
                    "cause and run the same command again: the study continues where it stopped"
                )
                break
            others_finishing = c.done + c.running >= sweep.target
            if not others_finishing and sweep.repeats and not has_waiting(study):
                fresh = fresh_params(study, sweep.search, sweep.baseline_flat, sweep.rng)
                if fresh is None:
                    sweep.say(f"stopping: every configuration of the search space is evaluated ({c.done})")
                    break
                study.enqueue_trial(fresh, user_attrs={"sweep.fresh": True})  # the next trial is a new one
            if not others_finishing:
                study.optimize(
                    lambda trial: run_trial(sweep, trial),
                    n_trials=1,
                    callbacks=[lambda study, trial: after_trial(sweep, study, trial)],
                    catch=(Exception,),
                )
        finally:
            lock.release()
        if others_finishing:  # the last trials are someone else's: wait, they may die and be re-queued
            say_waiting(sweep, study)
            for proc in sweep.procs:
                proc.poll()  # reap a dead worker so its pid reads as gone
            time.sleep(min(2.0, sweep.search.heartbeat_interval))
            sweep.fail_dead(study)


def say_waiting(sweep: SweepContext, study: optuna.Study) -> None:
    """Once per set of trials waited for: a silent wait looks like a hang."""
    running = tuple(
        t.number for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    )
    if running and running != sweep.waited_for:
        sweep.waited_for = running
        sweep.say(
            f"waiting for trial(s) {', '.join(map(str, running))} of other workers (a dead worker's "
            f"trial is failed and re-queued after {sweep.search.grace_period} s without a heartbeat)"
        )


def has_waiting(study: optuna.Study) -> bool:
    return bool(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))


def request_stop(sweep: SweepContext, signum, frame) -> None:
    """First Ctrl-C (or SIGTERM): finish and log the current trial, then stop. Second: stop now."""
    if sweep.stop_requested:
        raise KeyboardInterrupt
    sweep.stop_requested = True
    if signum == signal.SIGTERM:  # Ctrl-C reaches the whole process group; SIGTERM only us
        signal_all(sweep.procs, signum)
    sweep.say(
        f"\n{signal.Signals(signum).name}: finishing the current trial, then stopping "
        "(press Ctrl-C again to stop at once)"
    )


__all__ = ["REPEAT_LIMIT", "has_waiting", "request_stop", "say_waiting", "work"]
