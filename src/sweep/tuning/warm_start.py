"""Re-tune from an earlier study: its best configurations are the new study's first trials.

When the documents change or the space grows, the last study's winners are the best guesses
there are. ``--warm-start STUDY`` enqueues its ``k`` best distinct configurations after the
baseline, each as the new space can express it: a parameter the new space searches must hold a
value the space allows (choices, range, step, ``below``); one it no longer searches must equal
the new configuration's fixed value. A configuration that cannot be expressed is skipped and
the reason said, never silently bent to the nearest point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from sweep.errors import SweepError
from sweep.tuning.search import Param, SearchConfig
from sweep.tuning.space import is_active, value_range
from sweep.tuning.storage import load_existing_study
from sweep.tuning.trials import params_key, ranked


@dataclass
class WarmStart:
    """What an earlier study offers a new one: parameter sets to enqueue, and what was skipped, why."""

    source: str
    params: list[dict[str, Any]] = field(default_factory=list)
    trials: list[int] = field(default_factory=list)  # the source's trial numbers, as params
    skipped: list[str] = field(default_factory=list)

    def describe(self) -> str:
        head = f"warm start from study {self.source!r}: {len(self.params)} configuration(s) queued"
        if self.trials:
            head += " (its trials " + ", ".join(map(str, self.trials)) + ")"
        return "\n".join([head] + [f"  skipped {s}" for s in self.skipped])


def _outside(value: Any, p: Param, current: dict[str, Any]) -> str | None:
    """Why ``value`` is not a point ``p`` would suggest given the values chosen so far, or None."""
    if p.categorical is not None:
        return None if value in p.categorical else f"is not among the choices {p.categorical}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number"
    low, high = value_range(p, current)
    if p.int_range and value != int(value):
        return "is not a whole number"
    if not low - 1e-12 <= value <= high + 1e-12:
        return f"is outside [{low:g}, {high:g}]"
    if p.step and not math.isclose((value - low) / p.step, round((value - low) / p.step), abs_tol=1e-9):
        return f"is not on the step {p.step:g} from {low:g}"
    return None


def express(params: dict[str, Any], search: SearchConfig, baseline: dict[str, Any]) -> dict[str, Any] | str:
    """An earlier trial's parameters as the new space would suggest them, or why it cannot.

    Args:
        params: the earlier trial's parameters (dotted config keys).
        search: the new sweep's search section.
        baseline: the new baseline configuration, flat (``SweepConfig.baseline_flat``).

    Returns:
        The parameters to enqueue (the searched ones active under ``when``; a searched key the earlier
        study lacked takes the baseline's value), or a reason naming the key.

    Example:
        >>> express({"retrieval.top_k": 7}, search, flat)
        'retrieval.top_k=7 is outside [3, 5]'
    """
    chosen: dict[str, Any] = {}
    for name, p in search.space.items():
        current = {**baseline, **chosen}
        if not is_active(p, current):
            continue
        value = params.get(name, baseline.get(name))
        why = _outside(value, p, current)
        if why:
            return f"{name}={value!r} {why}"
        chosen[name] = int(value) if p.int_range else value
    for name, value in params.items():
        if name not in search.space and baseline.get(name) != value:
            return f"{name}={value!r} is not searched here and the configuration fixes {baseline.get(name)!r}"
    return chosen


def _ranked(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Complete trials, best first on the primary objective (earliest on ties), one per parameter set."""
    maximize = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
    done = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    seen, out = set(), []
    for t in ranked(done, maximize):
        key = params_key(t.params)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def warm_start(
    source: str,
    storage: str | None,
    runs_dir: str | Path,
    search: SearchConfig,
    baseline: dict[str, Any],
    top: int = 5,
) -> WarmStart:
    """The ``top`` best configurations of study ``source`` that the new space can express.

    Args:
        source: the earlier study's name.
        storage: its storage URL (None: the embedded ``runs_dir/<source>/optuna.db``).
        runs_dir: where the embedded stores live.
        search: the new sweep's search section.
        baseline: the new baseline configuration, flat.
        top: how many of its best configurations to try (those skipped count).

    Returns:
        :class:`WarmStart`.

    Raises:
        SweepError: no such study, or one without a finished trial.

    Example:
        >>> warm_start("hybrid", None, "runs", sweep_config.search, sweep_config.baseline_flat).params
    """
    study = load_existing_study(source, storage, Path(runs_dir))
    ranked = _ranked(study)
    if not ranked:
        raise SweepError(f"--warm-start {source}: the study has no complete trial to start from")
    out = WarmStart(source)
    queued = [express({}, search, baseline)]  # the baseline, trial 0 of every study
    for t in ranked[:top]:
        chosen = express(t.params, search, baseline)
        if isinstance(chosen, str):
            out.skipped.append(f"trial {t.number} ({t.values[0]:.4f}): {chosen}")
        elif chosen in queued:
            what = "the baseline" if chosen == queued[0] else "an earlier one"
            out.skipped.append(f"trial {t.number} ({t.values[0]:.4f}): here the same configuration as {what}")
        else:
            queued.append(chosen)
            out.params.append(chosen)
            out.trials.append(t.number)
    return out


__all__ = ["WarmStart", "express", "warm_start"]
