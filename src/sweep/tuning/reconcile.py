"""Make MLflow agree with Optuna after kills and outages; Optuna is the truth.

A trial's writes are ordered: its run is created RUNNING, its metrics are
logged, Optuna records the trial, and only then is the run closed. Whatever
moment a kill or an outage interrupts, :func:`reconcile` restores the
invariant *finished child runs == COMPLETE trials, one run per trial number*:

* a COMPLETE trial whose run is still RUNNING (killed after Optuna's write)
  is closed FINISHED, its metrics logged first if they never arrived;
* a COMPLETE trial without any usable run (MLflow was down) gets one, built
  from what the study recorded, tagged ``sweep.logged_late``;
* a run whose trial failed or was pruned is closed KILLED (or FAILED) and
  tagged with why; extra runs of one trial number are deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import optuna
from optuna.trial import TrialState

from sweep.errors import mask_url
from sweep.outputs.mlflow_client import TrackingUnavailable
from sweep.outputs.tracking import Tracker
from sweep.outputs.writer import TrackingWriter

PROBE_EVERY = 10.0  # seconds between checks whether an unreachable tracking server is back


@dataclass
class Reconciled:
    """What one pass changed, for the "recovered" line."""

    finished: list[int] = field(default_factory=list)  # RUNNING runs of COMPLETE trials, now FINISHED
    logged_late: list[int] = field(default_factory=list)  # COMPLETE trials that had no run
    closed: list[int] = field(default_factory=list)  # runs of trials that did not complete
    deleted: int = 0  # second runs of one trial number

    def __bool__(self) -> bool:
        return bool(self.finished or self.logged_late or self.closed or self.deleted)

    def describe(self) -> str:
        parts = []
        if self.finished:
            parts.append(f"{len(self.finished)} run(s) of complete trials closed as FINISHED")
        if self.logged_late:
            parts.append(f"{len(self.logged_late)} complete trial(s) logged to MLflow late")
        if self.closed:
            parts.append(f"{len(self.closed)} run(s) of unfinished trials closed as KILLED")
        if self.deleted:
            parts.append(f"{self.deleted} duplicate run(s) deleted")
        return "; ".join(parts)


def _rank(run) -> tuple:
    """Which of several runs of one trial to keep: finished first, then one with metrics, then the oldest."""
    return (run.info.status != "FINISHED", "objective" not in run.data.metrics, run.info.start_time or 0)


def reconcile(
    study: optuna.Study, tracker: Tracker, parent_id: str, objective: str, config_of: Callable[[dict], dict]
) -> Reconciled:
    """One pass over the study's trials and the parent's child runs (see the module docstring).

    Args:
        study: the Optuna study (the truth).
        tracker: its MLflow tracker, online.
        parent_id: the study's parent run.
        objective: the objective's name, tagged on late runs.
        config_of: a trial's parameters -> its full configuration as a dict, for late runs.

    Returns:
        What changed.
    """
    done = Reconciled()
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    runs: dict[int, list] = {}
    for run in tracker.children(parent_id):
        number = run.data.tags.get("sweep.trial", "")
        if number.isdigit():
            runs.setdefault(int(number), []).append(run)
    for number, trial in trials.items():
        found = sorted(runs.get(number, []), key=_rank)
        if trial.state == TrialState.RUNNING or trial.state == TrialState.WAITING:
            continue  # a live worker's (dead ones were failed before this pass)
        if trial.state == TrialState.COMPLETE:
            keep = found[0] if found else None
            for extra in found[1:]:
                tracker.client.delete_run(extra.info.run_id)
                done.deleted += 1
            if keep is None or "objective" not in keep.data.metrics:
                means = trial.user_attrs.get("means", {})
                rid = tracker.log_late(
                    parent_id,
                    number,
                    trial.params,
                    config_of(trial.params),
                    trial.values[0],
                    means,
                    objective,
                    keep.info.run_id if keep else None,
                )
                done.logged_late.append(number)
                tracker.end_trial(rid, "complete")
            elif keep.info.status != "FINISHED":
                tracker.end_trial(keep.info.run_id, "complete")
                done.finished.append(number)
            continue
        for run in found:
            if run.info.status != "RUNNING":
                continue
            if trial.state == TrialState.PRUNED:
                tracker.end_trial(run.info.run_id, "pruned")
            else:
                died = trial.user_attrs.get("fail_kind") in ("worker_died", None)  # None: failed as stale
                reason = trial.user_attrs.get("error") or "the trial did not finish"
                tracker.end_trial(run.info.run_id, "killed" if died else "failed", reason)
            done.closed.append(number)
    return done


class TrackingGuard:
    """Tracking calls that cannot fail a sweep: when MLflow stays away, warn once and go on.

    Args:
        tracker: the study's tracker.
        say: how to tell the user (the sweep's printer).
        retry_seconds: the retry window, for the warning.

    Example:
        >>> guard = TrackingGuard(tracker, print, 60)  # doctest: +SKIP
        >>> guard.call(tracker.end_trial, run_id, "complete")  # None when MLflow is away
    """

    def __init__(
        self,
        tracker: Tracker,
        say: Callable[[str], None],
        retry_seconds: float,
        writer: TrackingWriter | None = None,
    ):
        self.tracker, self.say, self.retry_seconds, self.writer = tracker, say, retry_seconds, writer
        self.warned, self.last_probe = False, 0.0

    def track(self, method: str, *args) -> None:
        """A trial's MLflow write (a :class:`Tracker` method): queued to the writer process, so the trial
        does not wait for MLflow, or made here without one. Nothing while MLflow is away: reconcile logs
        the trial from the study when it answers again."""
        if self.tracker.offline:
            return
        if self.writer is None:
            self.call(getattr(self.tracker, method), *args)
            return
        self.heard(self.writer.call(method, *args))
        if not self.writer.alive:
            self.writer = None  # it said why; this process logs from now on

    def flush(self, reconnected: bool = False) -> None:
        """Wait until the queued writes are made (before reconcile reads MLflow). ``reconnected``: MLflow
        answers again, so failures from the outage are known already and the writer looks again too."""
        if self.writer is None:
            return
        reports = self.writer.flush()
        if reconnected:
            reports = [r for r in reports if not r.startswith("unavailable")]
            self.writer.call("client.probe")
        self.heard(reports)

    def close(self) -> None:
        """The queued writes made, the writer process ended."""
        if self.writer is not None:
            writer, self.writer = self.writer, None
            self.heard(writer.close())

    def call(self, fn, *args):
        """``fn(*args)``, or None when MLflow does not answer (warned once per outage)."""
        if self.tracker.offline:
            return None
        try:
            return fn(*args)
        except TrackingUnavailable as e:
            self._warn(str(e))
            return None

    def heard(self, reports: list[str]) -> None:
        """What the writer process reported of queued calls (:class:`~sweep.outputs.writer.TrackingWriter`):
        MLflow away takes this side offline too (so it probes, then reconciles); a refused call is said."""
        for report in reports:
            kind, _, text = report.partition(": ")
            if kind == "unavailable":
                self.tracker.client.offline = True
                self._warn(text)
            else:
                self.say(f"warning: MLflow: {text}")

    def _warn(self, reason: str) -> None:
        if not self.warned:
            self.warned = True
            self.say(
                f"warning: {reason} at {mask_url(self.tracker.tracking_uri)} after retrying for "
                f"{self.retry_seconds:g}s. The sweep goes on: results stay in Optuna, and the missing runs "
                "are logged when MLflow answers again (or when you rerun the same command)"
            )

    def back_online(self) -> bool:
        """True once, when an unreachable MLflow answers again (looked at every PROBE_EVERY seconds)."""
        import time

        if not self.tracker.offline or time.monotonic() - self.last_probe < PROBE_EVERY:
            return False
        self.last_probe = time.monotonic()
        if self.tracker.client.probe():
            self.warned = False
            return True
        return False

    def reconcile(self, study: optuna.Study, parent_id: str, objective: str, config_of) -> Reconciled:
        """:func:`reconcile`, or nothing changed while MLflow is away."""
        found = self.call(reconcile, study, self.tracker, parent_id, objective, config_of)
        return found if found is not None else Reconciled()


__all__ = ["Reconciled", "TrackingGuard", "reconcile"]
