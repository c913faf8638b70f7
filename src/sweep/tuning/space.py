"""The search space, declared in the YAML's ``search`` section by config key path.

    search:
      objective: ndcg@10            # any metric name; direction: maximize (default) or minimize
      space:
        retrieval.fusion.alpha: {float: [0, 1], step: 0.1}
        retrieval.fusion.method: {categorical: [linear, rrf]}
        retrieval.fusion.rrf_k: {int: [10, 100], step: 10, when: {retrieval.fusion.method: rrf}}
        chunking.size: {int: [100, 400], step: 50}
        chunking.overlap: {int: [0, 200], step: 25, below: chunking.size}   # constraint: overlap < size
        retrieval.dense.model: {categorical: [minilm-l6, mpnet-base]}
        learning.rate: {float: [1e-4, 1e-1], log: true}

Parameters are suggested in the order written, so ``when`` (conditional)
and ``below`` (constraint) may refer to any earlier one (or a fixed config
key); a ``when`` value may be a list of accepted values. A parameter whose
``when`` does not hold keeps the YAML's fixed value and is not suggested,
as with Optuna's define-by-run ``if``.
"""

from __future__ import annotations

from typing import Any

from sweep.errors import ConfigError
from sweep.metrics.evaluate import parse_metric
from sweep.tuning.search import Param, SearchConfig


def suggest(trial, search: SearchConfig, baseline: dict[str, Any]) -> dict[str, Any]:
    """Ask the trial for each active parameter; inactive ones are left out (they keep the baseline)."""
    import warnings

    with warnings.catch_warnings():  # a `below` bound makes ranges Optuna trims to the step, and says so
        warnings.filterwarnings("ignore", message=".*range is not divisible by `step`.*")
        return _suggest(trial, search, baseline)


def _suggest(trial, search: SearchConfig, baseline: dict[str, Any]) -> dict[str, Any]:
    chosen: dict[str, Any] = {}
    for name, p in search.space.items():
        current = {**baseline, **chosen}
        if not is_active(p, current):
            continue
        if p.categorical is not None:
            chosen[name] = trial.suggest_categorical(name, p.categorical)
        elif p.int_range is not None:
            low, high = value_range(p, current)
            chosen[name] = trial.suggest_int(name, low, high, step=int(p.step or 1), log=p.log)
        else:
            low, high = value_range(p, current)
            chosen[name] = trial.suggest_float(name, low, high, step=p.step, log=p.log)
    return chosen


def when_holds(value: Any, wanted: Any) -> bool:
    """``when: {key: value}`` matches that value; ``when: {key: [a, b]}`` matches any of them."""
    return value in wanted if isinstance(wanted, list) else value == wanted


def is_active(p: Param, current: dict[str, Any]) -> bool:
    """Whether every ``when`` condition of ``p`` holds for the values chosen so far."""
    return all(when_holds(current.get(k), v) for k, v in p.when.items())


def value_range(p: Param, current: dict[str, Any]) -> tuple[Any, Any]:
    """A numeric parameter's ``(low, high)`` at this point: ``below`` caps the high end (an int stays
    under the other value, a float at most at it), never under ``low``. The one rule behind
    suggestions, the space's enumeration and a warm start's check."""
    low, high = p.int_range or p.float_range
    if p.below:
        high = min(high, int(current[p.below]) - 1 if p.int_range else float(current[p.below]))
    return low, max(low, high)


def grid(search: SearchConfig) -> dict[str, list[Any]]:
    """The grid for GridSampler: every parameter needs a finite set of values."""
    out = {}
    for name, p in search.space.items():
        if p.categorical is not None:
            out[name] = list(p.categorical)
        elif p.step:
            low, high = p.int_range or p.float_range
            n = int(round((high - low) / p.step)) + 1
            out[name] = [
                type(low)(low + i * p.step) if p.int_range else round(low + i * p.step, 10) for i in range(n)
            ]
        elif p.int_range:
            out[name] = list(range(p.int_range[0], p.int_range[1] + 1))
        else:
            raise ConfigError("", f"search.space.{name}", "grid search needs a step or categorical values")
    return out


def check_space(search: SearchConfig, baseline: dict[str, Any], problem, file: str) -> None:
    """Every value in the space must make a valid configuration with some choice of the others.

    Caught here, an impossible space (``overlap`` never below ``size``, an alpha of 2) costs the
    user one line at the start instead of a study of failed trials. The baseline (trial 0) must
    be a point of the space, or Optuna cannot enqueue it. ``problem(params)`` is the error
    message of the configuration with ``params``, or None when it is valid.
    """
    import itertools

    for name, value in baseline.items():
        p = search.space[name]
        if p.categorical is not None and value not in p.categorical:
            raise ConfigError(
                file,
                f"search.space.{name}",
                f"the configuration's own value {value!r} (the baseline, trial 0) is not among "
                f"the choices {p.categorical}",
                ["add it to the choices, or change the fixed value"],
            )

    def candidates(p: Param) -> list:
        return list(p.categorical) if p.categorical is not None else list(p.int_range or p.float_range)

    names = list(search.space)
    for name in names:
        others = [n for n in names if n != name]
        for value in candidates(search.space[name]):
            first = problem({name: value})
            if first is None:
                continue
            combos = itertools.islice(itertools.product(*(candidates(search.space[n]) for n in others)), 2000)
            if not any(problem({name: value, **dict(zip(others, c))}) is None for c in combos):
                raise ConfigError(
                    file,
                    f"search.space.{name}",
                    f"value {value!r} can never make a valid configuration: {first}",
                    ["narrow the range, or bound it with below: <other key>"],
                )


def check_objectives(search: SearchConfig, top_k: int, ks: tuple[int, ...], file: str) -> None:
    """Each objective must be a metric every trial computes, spelled as the results name it.

    ``NDCG@10`` or ``"recall@5 "`` would parse but never match a result (every trial fails with a
    KeyError), and ``ndcg@50`` over a ranking of ``top_k`` 10 is not NDCG@50. ``top_k`` is the largest
    the space allows (a searched top_k below the cutoff is a knob the objective may judge).

    Raises:
        ConfigError: naming ``search.objective`` (or ``search.extra_objectives``) and the valid names.
    """
    from sweep.metrics.evaluate import standard_metrics

    p = search.space.get("retrieval.top_k")
    if p is not None:
        top_k = max(p.categorical) if p.categorical is not None else int((p.int_range or p.float_range)[1])
    valid = standard_metrics(tuple(k for k in ks if k <= top_k) or (top_k,))
    named = [("search.objective", search.objective)]
    named += [("search.extra_objectives", n) for n in search.extra_objectives if n != "latency_ms"]
    for key, name in named:
        metric = parse_metric(name, key=key)
        canonical = metric.name
        if name != canonical:
            raise ConfigError(
                file,
                key,
                f"{name!r} is not how results name it: write {canonical!r}",
                ["valid here: " + ", ".join(valid)],
            )
        if metric.k is not None and metric.k > top_k:
            raise ConfigError(
                file,
                key,
                f"{name!r} cuts at {metric.k}, but a trial ranks at most {top_k} results (retrieval.top_k)",
                [f"raise retrieval.top_k to {metric.k}, or pick one of: " + ", ".join(valid)],
            )
