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

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError, SweepError
from .metrics.evaluate import parse_metric


class Param(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)

    categorical: list[Any] | None = None
    int_range: tuple[int, int] | None = Field(None, alias="int")
    float_range: tuple[float, float] | None = Field(None, alias="float")
    step: float | None = None
    log: bool = False
    when: dict[str, Any] = {}
    below: str | None = None

    @model_validator(mode="after")
    def _one_kind(self):
        kinds = [k for k in (self.categorical, self.int_range, self.float_range) if k is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of categorical: [...], int: [low, high], float: [low, high]")
        rng = self.int_range or self.float_range
        if rng and rng[0] > rng[1]:
            raise ValueError(f"low {rng[0]} is above high {rng[1]}")
        if self.log and self.step:
            raise ValueError("log and step cannot be combined")
        if self.step is not None and self.step <= 0:
            raise ValueError(f"step must be > 0, got {self.step}")
        if self.int_range and self.step is not None and self.step != int(self.step):
            raise ValueError(f"an int range needs a whole step, got {self.step}")
        if self.log and rng and rng[0] <= 0:
            raise ValueError(f"a log scale needs low > 0, got {rng[0]}")
        return self


STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def check_study_name(name: str, key: str = "--study") -> str:
    """A study name becomes a folder under runs/ and a SQL value: letters, digits, ``_ . -`` only.

    Args:
        name: the proposed name.
        key: what set it (``--study``, ``search.study``), for the message.

    Returns:
        The name, unchanged.

    Raises:
        SweepError: the name could leave the runs folder or break a query.

    Example:
        >>> check_study_name("hybrid-v2")
        'hybrid-v2'
    """
    if not STUDY_NAME.fullmatch(name) or ".." in name:
        raise SweepError(f"{key}: study name {name!r} is not allowed: use letters, digits, '_', '.' and '-' "
                         "(at most 100, no '..', no '/'), e.g. hybrid-v2")  # fmt: skip
    return name


def default_study_name(config_path: str) -> str:
    """The config file's name, with characters a study name cannot hold replaced by '-'."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", config_path).strip("-.") or "sweep"
    return re.sub(r"\.\.+", ".", stem)[:100]


class HoldoutSettings(BaseModel):
    """Tune on one part of the questions, report on the other.

    The dataset's own splits are used when it has them (BEIR train/test,
    native ``split`` fields tune/heldout); otherwise a seeded ``fraction``
    is held out. ``fraction: 0`` turns the held-out evaluation off.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tune_split: str | None = None
    heldout_split: str | None = None
    fraction: float = Field(0.3, ge=0, lt=1)
    seed: int = 42


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    objective: str = "ndcg@10"
    direction: Literal["maximize", "minimize"] = "maximize"
    sampler: Literal["tpe", "random", "grid"] = "tpe"
    seed: int = 42
    trials: int = Field(20, ge=0, le=1_000_000)
    timeout: float | None = Field(None, gt=0)
    study: str | None = None
    storage: str | None = None
    tracking_uri: str | None = None
    extra_objectives: list[str] = Field([], description="latency_ms (minimised) or metric names (maximised)")
    holdout: HoldoutSettings = HoldoutSettings()
    pruner: Literal["none", "median", "successive_halving"] = Field(
        "none", description="stop poor trials early, judged on growing batches of questions")
    pruning_batches: int = Field(4, ge=2, le=1000, description="question batches a trial is evaluated in when pruning")
    retries: int = Field(1, ge=0, le=100, description="times a trial whose worker died is re-queued")
    tracking_retry_seconds: float = Field(
        60, ge=0, le=3600, description="how long a tracking call is retried before the sweep goes on without MLflow")
    heartbeat_interval: int = Field(10, ge=1, le=3600, description="seconds between a running trial's heartbeats")
    grace_period: int = Field(60, ge=2, le=86_400, description="seconds without a heartbeat before a trial counts as dead")
    space: dict[str, Param] = {}

    @model_validator(mode="after")
    def _pruning_single_objective(self):
        if self.pruner != "none" and self.extra_objectives:
            raise ValueError("pruning needs a single objective (Optuna cannot prune multi-objective studies)")
        if self.grace_period <= self.heartbeat_interval:
            raise ValueError("grace_period must be longer than heartbeat_interval")
        return self

    @field_validator("study")
    @classmethod
    def _safe_study_name(cls, name: str | None):
        if name is not None:
            try:
                check_study_name(name, "search.study")
            except SweepError as e:
                raise ValueError(str(e).split(": ", 1)[1]) from None
        return name

    @model_validator(mode="after")
    def _known_objective(self):
        parse_metric(self.objective, key="search.objective")
        for name in self.extra_objectives:
            if name != "latency_ms":
                parse_metric(name, key="search.extra_objectives")
        return self

    @property
    def directions(self) -> list[str]:
        extra = ["minimize" if n == "latency_ms" else "maximize" for n in self.extra_objectives]
        return [self.direction, *extra]


def parse_search(data: dict | None, file: str) -> SearchConfig:
    try:
        search = SearchConfig.model_validate(data or {})
    except ValidationError as e:
        from .config import validation_error

        err = validation_error(file, e)
        raise ConfigError(file, "search." + err.key if err.key else "search", err.message) from None
    except ConfigError as e:  # raised by a validator (an unknown objective metric)
        raise e.located(file) from None
    names = list(search.space)
    for i, (name, p) in enumerate(search.space.items()):
        for dep in list(p.when) + ([p.below] if p.below else []):
            if dep not in names[:i]:
                raise ConfigError(file, f"search.space.{name}", f"refers to {dep!r}, which is not an earlier parameter")
    return search


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
        if not all(when_holds(current.get(k), v) for k, v in p.when.items()):
            continue
        if p.categorical is not None:
            chosen[name] = trial.suggest_categorical(name, p.categorical)
        elif p.int_range is not None:
            low, high = p.int_range
            if p.below:
                high = min(high, int(current[p.below]) - 1)
            chosen[name] = trial.suggest_int(name, low, max(low, high), step=int(p.step or 1), log=p.log)
        else:
            low, high = p.float_range
            if p.below:
                high = min(high, float(current[p.below]))
            chosen[name] = trial.suggest_float(name, low, max(low, high), step=p.step, log=p.log)
    return chosen


def when_holds(value: Any, wanted: Any) -> bool:
    """``when: {key: value}`` matches that value; ``when: {key: [a, b]}`` matches any of them."""
    return value in wanted if isinstance(wanted, list) else value == wanted


def grid(search: SearchConfig) -> dict[str, list[Any]]:
    """The grid for GridSampler: every parameter needs a finite set of values."""
    out = {}
    for name, p in search.space.items():
        if p.categorical is not None:
            out[name] = list(p.categorical)
        elif p.step:
            low, high = p.int_range or p.float_range
            n = int(round((high - low) / p.step)) + 1
            out[name] = [type(low)(low + i * p.step) if p.int_range else round(low + i * p.step, 10) for i in range(n)]
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
            raise ConfigError(file, f"search.space.{name}",
                              f"the configuration's own value {value!r} (the baseline, trial 0) is not among "
                              f"the choices {p.categorical}", ["add it to the choices, or change the fixed value"])  # fmt: skip

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
                raise ConfigError(file, f"search.space.{name}", f"value {value!r} can never make a valid configuration: {first}",
                                  ["narrow the range, or bound it with below: <other key>"])  # fmt: skip


def check_objectives(search: SearchConfig, top_k: int, ks: tuple[int, ...], file: str) -> None:
    """Each objective must be a metric every trial computes, spelled as the results name it.

    ``NDCG@10`` or ``"recall@5 "`` would parse but never match a result (every trial fails with a
    KeyError), and ``ndcg@50`` over a ranking of ``top_k`` 10 is not NDCG@50. ``top_k`` is the largest
    the space allows (a searched top_k below the cutoff is a knob the objective may judge).

    Raises:
        ConfigError: naming ``search.objective`` (or ``search.extra_objectives``) and the valid names.
    """
    from .metrics.evaluate import standard_metrics

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
            raise ConfigError(file, key, f"{name!r} is not how results name it: write {canonical!r}",
                              ["valid here: " + ", ".join(valid)])  # fmt: skip
        if metric.k is not None and metric.k > top_k:
            raise ConfigError(file, key, f"{name!r} cuts at {metric.k}, but a trial ranks at most {top_k} results "
                              "(retrieval.top_k)", [f"raise retrieval.top_k to {metric.k}, or pick one of: "
                                                    + ", ".join(valid)])  # fmt: skip
