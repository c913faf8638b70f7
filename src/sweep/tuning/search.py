"""The ``search:`` section of a sweep file: objective, space, sampler, stores, held-out share, limits.

Parsed once with the rest of the file by :func:`sweep.tuning.sweep_config.load_sweep_config`; a
parameter's ``when``/``below`` may only name an earlier parameter, checked here, at load time.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sweep.errors import ConfigError, SweepError
from sweep.metrics.evaluate import parse_metric


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
        raise SweepError(
            f"{key}: study name {name!r} is not allowed: use letters, digits, '_', '.' and '-' "
            "(at most 100, no '..', no '/'), e.g. hybrid-v2"
        )
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


class ScreenSettings(BaseModel):
    """Score a new (model, chunking) pair over a BM25 candidate pool before encoding its corpus.

    A pair whose pool score is below the median of the finished trials' is pruned there
    (:mod:`sweep.tuning.screening`); ``scripts/screen_check.py`` measures how well pool scores rank pairs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    pool: int = Field(200, ge=1, le=100_000, description="BM25 candidates per tuning question, pooled")


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
        "none", description="stop poor trials early, judged on growing batches of questions"
    )
    pruning_batches: int = Field(
        4, ge=2, le=1000, description="question batches a trial is evaluated in when pruning"
    )
    screen: ScreenSettings | None = Field(None, description="off unless set, e.g. screen: {pool: 200}")
    retries: int = Field(1, ge=0, le=100, description="times a trial whose worker died is re-queued")
    tracking_retry_seconds: float = Field(
        60,
        ge=0,
        le=3600,
        description="how long a tracking call is retried before the sweep goes on without MLflow",
    )
    heartbeat_interval: int = Field(
        10, ge=1, le=3600, description="seconds between a running trial's heartbeats"
    )
    grace_period: int = Field(
        60, ge=2, le=86_400, description="seconds without a heartbeat before a trial counts as dead"
    )
    space: dict[str, Param] = {}

    @model_validator(mode="after")
    def _pruning_single_objective(self):
        pruning = "pruning" if self.pruner != "none" else "screening" if self.screen is not None else None
        if pruning and self.extra_objectives:
            raise ValueError(
                f"{pruning} needs a single objective (Optuna cannot prune multi-objective studies)"
            )
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
        from sweep.config.load import validation_error

        err = validation_error(file, e)
        raise ConfigError(file, "search." + err.key if err.key else "search", err.message) from None
    except ConfigError as e:  # raised by a validator (an unknown objective metric)
        raise e.located(file) from None
    names = list(search.space)
    for i, (name, p) in enumerate(search.space.items()):
        for dep in list(p.when) + ([p.below] if p.below else []):
            if dep not in names[:i]:
                raise ConfigError(
                    file, f"search.space.{name}", f"refers to {dep!r}, which is not an earlier parameter"
                )
    return search
