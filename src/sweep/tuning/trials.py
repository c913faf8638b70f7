"""What the study's trials say: how many count, which repeat another, how big the space is.

The study's size counts *distinct* configurations that finished (complete or
pruned). A trial whose parameters repeat an earlier trial's is recorded as
failed with ``fail_kind: duplicate`` and ``duplicate_of``: it never runs the
pipeline, never takes the place of a new configuration, and does not count
toward the failed-trial stop. Only a trial's own error does, and only in the
current run (``sweep.session``), so a corrected config resumes a study that
failed before.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from sweep.tuning.search import SearchConfig
from sweep.tuning.space import is_active, suggest, value_range

KIND_ATTR = "fail_kind"
# who runs a trial, stamped in one write when it starts: host, pid, process start time, the trial's
# number (a retry copy carries its dead predecessor's until restamped) and the sweep session
WORKER_ATTR = "worker"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


@dataclass(frozen=True)
class Counts:
    done: int  # distinct finished configurations: what the study's size counts
    running: int
    failed: int  # trials of this session that raised (not duplicates, not dead workers)


def session_of(trial: optuna.trial.FrozenTrial) -> str | None:
    """The sweep session (one run of the command) whose worker last stamped the trial."""
    return (trial.user_attrs.get(WORKER_ATTR) or {}).get("session")


def counts(study: optuna.Study, session: str | None = None, trials: list | None = None) -> Counts:
    """The study's progress; ``failed`` counts only the given session's own trial errors.

    ``trials`` is a snapshot of the study's trials already read (one storage read serves several checks)."""
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    done = {params_key(t.params) for t in trials if t.state in FINISHED}
    failed = sum(
        t.state == TrialState.FAIL and t.user_attrs.get(KIND_ATTR) == "error" and session_of(t) == session
        for t in trials
    )
    return Counts(len(done), sum(t.state == TrialState.RUNNING for t in trials), failed)


def params_key(params: dict[str, Any]) -> tuple:
    """A parameter set as one hashable key: two trials with equal keys are one configuration."""
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def twin_of(
    trials: list, number: int, params: dict[str, Any], session: str | None = None
) -> optuna.trial.FrozenTrial | None:
    """An earlier trial with the same parameters: finished, running (lower number wins), or failed with
    an error in this session (the same error again would teach nothing; a later run may retry it).

    ``trials``: the study's trials (``study.get_trials(deepcopy=False)``)."""
    key = params_key(params)
    for t in trials:
        if t.number == number or t.state == TrialState.WAITING or params_key(t.params) != key:
            continue
        if t.state == TrialState.FAIL and not (
            t.user_attrs.get(KIND_ATTR) == "error" and session_of(t) == session
        ):
            continue
        if t.state != TrialState.RUNNING or t.number < number:
            return t
    return None


def is_surplus(trials: list, trial_number: int, target: int) -> bool:
    """Two machines may start the last trial at once; the one with the higher number stands down.

    ``trials``: the study's trials (``study.get_trials(deepcopy=False)``)."""
    ahead = {
        params_key(t.params) if t.state in FINISHED else ("running", t.number)
        for t in trials
        if t.number < trial_number and (t.state in FINISHED or t.state == TrialState.RUNNING)
    }
    return len(ahead) >= target


def configurations(search: SearchConfig, baseline: dict[str, Any], cap: int = 100_000):
    """Every configuration of the space as a parameter dict, or None when it is unbounded or over ``cap``.

    Conditions (``when``) and constraints (``below``) are followed exactly, as :func:`space.suggest` does.
    """
    names = list(search.space)
    out: list[dict[str, Any]] = []

    def values(name: str, current: dict) -> list | None:
        p = search.space[name]
        if p.categorical is not None:
            return list(p.categorical)
        low, high = value_range(p, current)
        if p.int_range:
            return list(range(int(low), int(high) + 1, int(p.step or 1)))
        if not p.step:
            return None
        return [low + i * p.step for i in range(int((high - low) / p.step + 1e-9) + 1)]

    def walk(i: int, chosen: dict) -> bool:
        if len(out) > cap:
            return False
        if i == len(names):
            out.append(chosen)
            return True
        p = search.space[names[i]]
        current = {**baseline, **chosen}
        if not is_active(p, current):
            return walk(i + 1, chosen)
        options = values(names[i], current)
        return options is not None and all(walk(i + 1, {**chosen, names[i]: v}) for v in options)

    return out if walk(0, {}) and len(out) <= cap else None


def space_size(search: SearchConfig, baseline: dict[str, Any]) -> int | None:
    """How many distinct configurations the space holds; None when unbounded (a float without step) or huge."""
    found = configurations(search, baseline)
    return None if found is None else len(found)


def fresh_params(
    study: optuna.Study, search: SearchConfig, baseline: dict[str, Any], rng: random.Random
) -> dict[str, Any] | None:
    """A configuration no trial has finished or is running, drawn at random; None when none is left.

    Samplers such as TPE keep proposing their favourite point in a small discrete space, and a repeat
    teaches them nothing: after one, the sweep enqueues one of these so the next trial is new.
    """
    taken = {
        params_key(t.params) for t in study.get_trials(deepcopy=False, states=(*FINISHED, TrialState.RUNNING))
    }
    every = configurations(search, baseline)
    if every is not None:
        left = [c for c in every if params_key(c) not in taken]
        return rng.choice(left) if left else None
    for _ in range(1000):  # unbounded space: random draws, as RandomSampler would
        sampler = optuna.samplers.RandomSampler(seed=rng.randrange(2**31))
        probe = optuna.create_study(sampler=sampler)
        params = suggest(probe.ask(), search, baseline)
        if params_key(params) not in taken:
            return params
    return None


def worker_seed(seed: int, identity: str) -> int:
    """A sampler seed of this worker's own: the study seed for the study's first process, mixed with the
    worker's identity for every other, so workers do not propose the same sequence."""
    if not identity:
        return seed
    digest = hashlib.sha256(f"{seed}:{identity}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


__all__ = [
    "Counts",
    "configurations",
    "counts",
    "fresh_params",
    "is_surplus",
    "params_key",
    "ranked",
    "session_of",
    "space_size",
    "twin_of",
    "worker_seed",
]


def best_of(trials: list, maximize: bool):
    """The trial with the best primary objective; the earliest on ties. None for no trials."""
    sign = 1 if maximize else -1
    return max(trials, key=lambda t: (sign * t.values[0], -t.number)) if trials else None


def ranked(trials: list, maximize: bool) -> list:
    """The trials best first on the primary objective, the earliest first on ties (:func:`best_of`'s rule)."""
    sign = 1 if maximize else -1
    return sorted(trials, key=lambda t: (-sign * t.values[0], t.number))


def best_trial(study, trials: list | None = None):
    """The study's best trial on its primary objective (with several objectives, from the Pareto front).

    ``trials``: a snapshot of the study's trials already read, else they are read."""
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    pool = study.best_trials if len(study.directions) > 1 and complete else complete
    return best_of(pool, study.directions[0] == optuna.study.StudyDirection.MAXIMIZE)
