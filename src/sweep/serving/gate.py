"""``sweep gate BASELINE CANDIDATE``: score both sides on one eval set and decide (analysis/gate.py).

A side is an exported retriever folder (its ``best_config.yaml``), a config file, or a TREC run
file. Configs are run on the gate's eval set: the ``dataset:`` and ``evaluation:`` sections of
``--eval-set`` (a config or export folder), by default the candidate's (else the baseline's), so
both sides answer the same questions over the same documents. When a side is a run file, every
side is scored as a document run against document labels (the eval set's, or a qrels file), the
same way for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.analysis.gate import GateResult, judge
from sweep.config.load import load_config
from sweep.config.schema import EvalConfig
from sweep.errors import SweepError
from sweep.metrics import Scores, score, standard_metrics
from sweep.metrics.evaluate import parse_metric

CONFIG_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class GateSide:
    """One side of a gate: a configuration to run, or a run file already made."""

    name: str
    config: EvalConfig | None = None
    run_file: Path | None = None


def read_side(ref: str | Path) -> GateSide:
    """An exported folder, a config file or a TREC run file, told apart by what is on disk.

    Args:
        ref: the path as the user gave it.

    Returns:
        :class:`GateSide`.

    Raises:
        SweepError: the path does not exist, or is a folder without ``best_config.yaml``.

    Example:
        >>> read_side("configs/hybrid.yaml").config.retrieval.mode
        'bm25'
    """
    path = Path(ref)
    if path.is_dir():
        exported = path / "best_config.yaml"
        if not exported.is_file():
            raise SweepError(
                f"{path}: a folder without best_config.yaml; pass an export folder "
                "(`sweep export STUDY --out DIR`), a config file or a TREC run file"
            )
        return GateSide(str(path), config=load_config(exported))
    if not path.is_file():
        raise SweepError(f"{path}: no such file or folder (an export folder, a config or a TREC run file)")
    if path.suffix.lower() in CONFIG_SUFFIXES:
        return GateSide(str(path), config=load_config(path))
    return GateSide(str(path), run_file=path)


def _eval_config(eval_set: str | Path | None, sides: list[GateSide]) -> EvalConfig | None:
    if eval_set is not None:
        chosen = read_side(eval_set)
        return chosen.config  # None: a qrels file
    return next((s.config for s in reversed(sides) if s.config is not None), None)


def _document_qrels(config: EvalConfig, lenient: bool) -> dict[str, dict[str, int]]:
    from sweep.data.select import load_dataset

    eval_set = load_dataset(config.dataset, lenient=lenient)
    if any(e.start is not None for q in eval_set.questions for e in q.evidence):
        raise SweepError(
            f"{config.source}: dataset: the eval set has span labels, and a run file names documents; "
            "gate configs or export folders on it instead of run files"
        )
    return {q.id: {e.doc_id: e.grade for e in q.evidence} for q in eval_set.questions}


def _side_scores(
    side: GateSide, eval_config: EvalConfig | None, qrels, metrics, gated, threshold, lenient
) -> Scores:
    from sweep.pipeline.evaluate import evaluate_config

    if side.config is not None:
        if eval_config is None:
            raise SweepError(
                f"{side.name}: a config needs an eval set to run on; pass --eval-set CONFIG (a qrels file "
                "scores run files only)"
            )
        config = side.config.model_copy(
            update={"dataset": eval_config.dataset, "evaluation": eval_config.evaluation}
        )
        result = evaluate_config(config, lenient=lenient, extra_metrics=gated)  # even past its top_k
        if qrels is None:
            return result.scores
        run = {q: dict(hits) for q, hits in result.ranking().items()}
        return score(qrels, run, metrics, threshold=threshold)
    return score(qrels, side.run_file, metrics, threshold=threshold)


def gate(
    baseline: str | Path,
    candidate: str | Path,
    *,
    eval_set: str | Path | None = None,
    metrics: list[str] | tuple[str, ...] = ("ndcg@10",),
    max_drop: float = 0.01,
    alpha: float = 0.05,
    lenient: bool = False,
    seed: int = 0,
) -> GateResult:
    """Score a candidate and a baseline on one eval set and decide whether the candidate is not worse.

    Args:
        baseline, candidate: export folders, config files or TREC run files.
        eval_set: a config or export folder whose ``dataset:`` (and ``evaluation:``) the sides are
            scored on, or a TREC qrels file (run files only); default: the candidate's config, else
            the baseline's.
        metrics: the gated metrics; each must pass.
        max_drop: how far the candidate's mean may fall below the baseline's and still pass.
        alpha: the one-sided test's level.
        lenient: drop invalid eval-set items instead of failing.
        seed: of the tests and intervals.

    Returns:
        :class:`GateResult`; ``.passed`` is the verdict.

    Raises:
        SweepError: an input that cannot be read or paired, in one line.

    Example:
        >>> gate("prod_retriever/", "configs/hybrid.yaml", max_drop=0.01).passed
        True
    """
    metrics = [m.strip().lower() for m in metrics]
    for m in metrics:
        parse_metric(m, key="--metric")  # a misspelt metric fails before anything runs
    sides = [read_side(baseline), read_side(candidate)]
    eval_config = _eval_config(eval_set, sides)
    names = standard_metrics(eval_config.evaluation.ks) if eval_config else standard_metrics()
    names += [m for m in metrics if m not in names]
    qrels, threshold = None, 1
    if any(s.run_file is not None for s in sides):
        if eval_config is not None:
            qrels, threshold = _document_qrels(eval_config, lenient), eval_config.dataset.relevance_threshold
        elif eval_set is not None:
            qrels = str(eval_set)  # a TREC qrels file
        else:
            raise SweepError("both sides are run files: pass --eval-set QRELS (or a config with the labels)")
    scores = [_side_scores(s, eval_config, qrels, names, list(metrics), threshold, lenient) for s in sides]
    where = eval_config.dataset.path if eval_config else str(eval_set)
    result = judge(
        *scores,
        list(metrics),
        max_drop=max_drop,
        alpha=alpha,
        baseline_name=sides[0].name,
        candidate_name=sides[1].name,
        eval_set=where,
        seed=seed,
    )
    dataset = eval_config.dataset if eval_config else None
    if dataset and (
        (dataset.holdout and dataset.holdout.part == "tune") or dataset.split in ("tune", "train")
    ):
        result.warnings.append(
            "the eval set is a sweep's tuning questions (dataset.holdout / dataset.split), on which it picked "
            "its winner: pass --eval-set with the held-out or the whole set"
        )
    return result


__all__ = ["GateSide", "gate", "read_side"]
