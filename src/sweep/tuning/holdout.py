"""Which questions the study tunes on and which it keeps for the final word.

Hundreds of trials over a few hundred questions overfit them; the number a
user should believe comes from questions no trial saw. A dataset's own
splits win (SciFact: train to tune, test held out; the bundled set:
``tune``/``heldout``); otherwise a seeded share of the questions is held out,
chosen by hashing each question id so the split does not move when the file
is reordered or grows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sweep.config.schema import DatasetConfig
from sweep.data import EvalSet
from sweep.tuning.search import HoldoutSettings

# pairs of split names we recognise, tried in order: (tune, held out)
KNOWN_SPLITS = (("tune", "heldout"), ("train", "test"), ("dev", "test"), ("train", "dev"))


@dataclass(frozen=True)
class Holdout:
    """How a sweep divides its dataset; ``tune``/``heldout`` are dataset-section patches."""

    tune: dict
    heldout: dict
    description: str


def own_splits(dataset: DatasetConfig, load: Callable[[], EvalSet]) -> tuple[str, str] | None:
    """The dataset's own (tune, held-out) split names, if it has a recognised pair."""
    if dataset.loader == "beir":
        present = {p.stem for p in (Path(dataset.path) / "qrels").glob("*.tsv")}
        wanted = dataset.split or "test"
        for tune, held in KNOWN_SPLITS:
            if held == wanted and {tune, held} <= present:
                return tune, held
        return None
    if dataset.loader in ("native", "python_reference") and not dataset.split:
        present = {q.split for q in load().questions if q.split}
        for pair in KNOWN_SPLITS:
            if set(pair) <= present:
                return pair
    return None


def plan_holdout(
    settings: HoldoutSettings, dataset: DatasetConfig, load: Callable[[], EvalSet]
) -> Holdout | None:
    """Decide the split once, at the start of a sweep; None when held-out evaluation is off."""
    if settings.tune_split or settings.heldout_split:
        if not (settings.tune_split and settings.heldout_split):
            from sweep.errors import ConfigError

            raise ConfigError("", "search.holdout", "give both tune_split and heldout_split, or neither")
        pair = (settings.tune_split, settings.heldout_split)
    else:
        pair = own_splits(dataset, load)
    if pair is not None:
        tune, held = pair
        return Holdout(
            {"split": tune}, {"split": held}, f"the dataset's own splits: tune on {tune!r}, hold out {held!r}"
        )
    if settings.fraction == 0:
        return None
    common = {"fraction": settings.fraction, "seed": settings.seed}
    return Holdout(
        {"holdout": {"part": "tune", **common}},
        {"holdout": {"part": "heldout", **common}},
        f"{settings.fraction:.0%} of the questions held out (seed {settings.seed})",
    )


__all__ = ["Holdout", "KNOWN_SPLITS", "own_splits", "plan_holdout"]
