"""Which eval set a dataset section means: loader dispatch, split, cap, seeded partition, merging."""

from __future__ import annotations

import hashlib
from pathlib import Path

from sweep.config.schema import DatasetConfig, HoldoutPart
from sweep.data.beir import load_beir
from sweep.data.files import load_files
from sweep.data.jsonl import load_native
from sweep.data.model import EvalSet, Question
from sweep.data.spans import load_span_csv
from sweep.data.validate import merge_overlapping_evidence
from sweep.errors import ConfigError


def load_dataset(config: DatasetConfig, lenient: bool = False, scorable: bool = True) -> EvalSet:
    """The eval set a dataset section selects: loaded, filtered to its split, capped, partitioned, merged.

    Args:
        config: the ``dataset:`` section.
        lenient: drop invalid items (listed in ``eval_set.dropped``) instead of failing; so does
            ``config.lenient``.
        scorable: some question must have relevant evidence (not so for serving or labelling).

    Returns:
        The :class:`EvalSet` a trial scores.

    Raises:
        ConfigError: the path does not exist, or no selected question has evidence to score.

    Example:
        >>> load_dataset(DatasetConfig(loader="python_reference", path="bundled")).questions[0].id
    """
    lenient = lenient or config.lenient
    if config.loader == "python_reference":
        from sweep.data.python_reference import load_python_reference

        eval_set = load_python_reference(None if config.path == "bundled" else config.path)
    else:
        path = Path(config.path)
        if not path.exists():
            raise ConfigError(
                "", "dataset.path", f"{path} does not exist", ["point dataset.path at your eval set"]
            )
        if config.loader == "beir":
            eval_set = load_beir(path, config.split or "test", lenient=lenient)
        elif config.loader == "files":
            eval_set = load_files(path, config.questions, pattern=config.glob, lenient=lenient)
        elif config.loader == "span_csv":
            eval_set = load_span_csv(path, config.corpora, lenient=lenient)
        else:
            eval_set = load_native(path, lenient=lenient)
    if config.split and config.loader in (
        "native",
        "python_reference",
        "files",
    ):  # BEIR's split picks its qrels file
        eval_set = eval_set.with_questions([q for q in eval_set.questions if q.split == config.split])
    if config.max_questions:
        eval_set = eval_set.with_questions(eval_set.questions[: config.max_questions])
    if config.holdout:
        eval_set = eval_set.with_questions(partition(eval_set.questions, config.holdout))
    if config.merge_overlapping_evidence:
        eval_set = merge_overlapping_evidence(eval_set)
    if scorable and not eval_set.answerable(config.relevance_threshold)[0]:
        raise ConfigError(
            "",
            "dataset",
            f"none of the {len(eval_set.questions)} selected questions has evidence of "
            f"grade >= {config.relevance_threshold} (dataset.relevance_threshold), so nothing can be "
            "scored",
            ["add evidence to the questions, or check dataset.split and the threshold"],
        )
    return eval_set


def partition(questions: list[Question], part: HoldoutPart) -> list[Question]:
    """The ``part`` side of a seeded split; the two sides are disjoint and cover every question."""

    def rank(q: Question) -> str:
        return hashlib.sha256(f"{part.seed}:{q.id}".encode()).hexdigest()

    ordered = sorted(questions, key=rank)
    n_heldout = max(1, round(part.fraction * len(ordered))) if len(ordered) > 1 else 0
    held = {q.id for q in ordered[:n_heldout]}
    return [q for q in questions if (q.id in held) == (part.part == "heldout")]


__all__ = ["load_dataset", "partition"]
