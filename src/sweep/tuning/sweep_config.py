"""A sweep file, parsed once: the baseline configuration, the ``search:`` section and the held-out plan.

Every trial's configuration is a typed copy of the validated baseline (:func:`with_values`), never a
re-read of the YAML; a value the space could propose that no configuration accepts is found here,
at load time, not after several trials failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.config.load import (
    apply_overrides,
    blame_overrides,
    build_config,
    check_cache_dir,
    read_yaml,
    with_values,
)
from sweep.config.schema import EvalConfig
from sweep.data.select import load_dataset
from sweep.errors import ConfigError
from sweep.llm import reachable
from sweep.outputs.run_view import flatten
from sweep.tuning.holdout import Holdout, plan_holdout
from sweep.tuning.search import SearchConfig, parse_search
from sweep.tuning.space import check_objectives, check_space, is_active


@dataclass(frozen=True)
class SweepConfig:
    """The whole sweep file, validated.

    Attributes:
        path: the YAML file (messages name it; relative paths in it are relative to it).
        base: the baseline configuration, restricted to the tuning questions when some are held out.
        search: the ``search:`` section.
        holdout: how the questions are divided (None: no held-out questions).
        overrides: the ``key=value`` changes applied to the file.
    """

    path: Path
    base: EvalConfig
    search: SearchConfig
    holdout: Holdout | None
    overrides: tuple[str, ...] = ()

    @property
    def baseline_flat(self) -> dict[str, Any]:
        """The baseline as flat dotted keys (``retrieval.fusion.alpha``), as the space names them."""
        return flatten(self.base.model_dump(mode="json", exclude={"source"}))

    def for_trial(self, params: dict[str, Any], heldout: bool = False) -> EvalConfig:
        """A trial's configuration; ``heldout`` swaps the tuning questions for the held-out ones.

        Example:
            >>> sweep_config.for_trial({"retrieval.fusion.alpha": 0.3}).retrieval.fusion.alpha  # doctest: +SKIP
            0.3
        """
        changes = dict(params)
        if heldout:
            changes |= {"dataset.split": None, "dataset.holdout": None}
            changes |= {f"dataset.{k}": v for k, v in self.holdout.heldout.items()}
        return with_values(self.base, changes)

    def baseline_params(self) -> dict[str, Any]:
        """The searched parameters at the baseline's values (those whose ``when`` holds there)."""
        flat, out = self.baseline_flat, {}
        for name, p in self.search.space.items():
            current = {**flat, **out}
            if is_active(p, current):
                out[name] = flat[name]
        return out


def load_sweep_config(path: str | Path, overrides: list[str] = ()) -> SweepConfig:
    """Read and check a sweep file: unknown keys, space keys that name no setting, values no
    configuration accepts and objectives the evaluation cannot compute are one-line errors here.

    Args:
        path: the YAML file with its ``search:`` section.
        overrides: ``key=value`` changes of the baseline, e.g. ``["retrieval.top_k=20"]``.

    Returns:
        The :class:`SweepConfig`.

    Raises:
        ConfigError: naming the file (or the override) and the key.

    Example:
        >>> load_sweep_config("configs/hybrid.yaml").search.objective
        'ndcg@10'
    """
    path, file = Path(path), str(path)
    data = apply_overrides(read_yaml(path), list(overrides), file)
    search = parse_search(data.pop("search", None), file)
    try:
        base = build_config(data, file, path.parent)  # any other top-level key is an error (a stray `study:`)
    except ConfigError as e:
        raise blame_overrides(e, list(overrides)) from None

    def load_baseline_dataset():
        try:
            return load_dataset(base.dataset)
        except ConfigError as e:
            raise e.located(file) from None

    try:
        holdout = plan_holdout(search.holdout, base.dataset, load_baseline_dataset)
    except ConfigError as e:
        raise e.located(file) from None
    if holdout is not None:  # every trial sees the tuning questions only
        base = with_values(base, {f"dataset.{k}": v for k, v in holdout.tune.items()})
    config = SweepConfig(path, base, search, holdout, tuple(overrides))
    flat = config.baseline_flat
    for name, p in search.space.items():
        for key in [name, *p.when, *([p.below] if p.below else [])]:
            if key not in flat:
                raise ConfigError(file, f"search.space.{name}", f"{key!r} is not a configuration key")

    def problem(params: dict) -> str | None:
        try:
            config.for_trial(params)
            return None
        except ConfigError as e:
            return e.message

    check_space(search, config.baseline_params(), problem, file)
    check_objectives(search, base.retrieval.top_k, base.evaluation.ks, file)
    check_cache_dir(base)
    check_llm_endpoint(config, file)
    return config


LLM_TRANSFORMS = {"hyde", "llm_multi_query"}


def check_llm_endpoint(config: SweepConfig, file: str) -> None:
    """A sweep that would ask an LLM refuses to start when the endpoint is not there: otherwise its
    trials would fail one by one through the night."""
    choice = config.search.space.get("retrieval.query.transform")
    used = LLM_TRANSFORMS & (
        {config.base.retrieval.query.transform} | set(choice.categorical or [] if choice else [])
    )
    if not used:
        return
    llm = config.base.retrieval.query.llm
    if llm is None:
        raise ConfigError(
            file,
            "retrieval.query.llm",
            f"{', '.join(sorted(used))} need an endpoint",
            ["add llm: {url: ..., model: ...}"],
        )
    if (why := reachable(llm.url)) is not None:
        raise ConfigError(
            file,
            "retrieval.query.llm.url",
            f"{llm.url} cannot be reached ({why}), and the sweep would ask it ({', '.join(sorted(used))})",
            ["start the server, or leave those transforms out of the search"],
        )


__all__ = ["LLM_TRANSFORMS", "SweepConfig", "check_llm_endpoint", "load_sweep_config"]
