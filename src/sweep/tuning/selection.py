"""Each trial keeps its objective per tuning question (a user attribute of the Optuna trial), so the
end of a sweep can say how much the best trial's score owes to having been picked
(:mod:`sweep.analysis.selection`) from the study alone: no trial is re-run, MLflow is not needed."""

from __future__ import annotations

import base64
import hashlib
from collections import Counter

import numpy as np
import optuna
from optuna.trial import TrialState

from sweep.analysis.selection import SelectionEstimate, selection_corrected
from sweep.metrics.evaluate import Scores

VALUES_ATTR = "question_values"


def record_question_values(trial: optuna.Trial, scores: Scores, objective: str) -> None:
    """Keep ``objective`` per question on ``trial``, in question-id order (the same for every trial
    on one question set, however a trial's batches were ordered), float64 in base64 (8 bytes each).

    Args:
        trial: the running trial.
        scores: its per-question values.
        objective: the study's objective.

    Returns:
        None.

    Example:
        >>> record_question_values(trial, result.scores, "ndcg@10")  # doctest: +SKIP
    """
    order = sorted(range(len(scores.question_ids)), key=scores.question_ids.__getitem__)
    ids = "\n".join(scores.question_ids[i] for i in order)
    values = np.asarray(scores.values[objective], dtype=np.float64)[order]
    trial.set_user_attr(
        VALUES_ATTR,
        {
            "questions": hashlib.sha1(ids.encode()).hexdigest()[:16],
            "values": base64.b64encode(values.tobytes()).decode(),
        },
    )


def question_values(trials: list[optuna.trial.FrozenTrial]) -> tuple[np.ndarray, list[int]]:
    """``(trials, questions)`` values of the complete trials that kept them, on their most common
    question set (a study resumed on changed data may hold two), and those trials' numbers."""
    kept = [t for t in trials if t.state == TrialState.COMPLETE and VALUES_ATTR in t.user_attrs]
    if not kept:
        return np.zeros((0, 0)), []
    common = Counter(t.user_attrs[VALUES_ATTR]["questions"] for t in kept).most_common(1)[0][0]
    kept = [t for t in kept if t.user_attrs[VALUES_ATTR]["questions"] == common]
    rows = [np.frombuffer(base64.b64decode(t.user_attrs[VALUES_ATTR]["values"]), np.float64) for t in kept]
    return np.stack(rows), [t.number for t in kept]


def study_selection(study: optuna.Study, seed: int = 0) -> SelectionEstimate | None:
    """The selection-corrected estimate of a single-objective study; None with fewer than two trials
    (nothing was selected) or two questions.

    Args:
        study: the study.
        seed: the bootstrap's seed.

    Returns:
        :class:`SelectionEstimate` or None.

    Example:
        >>> study_selection(optuna.load_study(study_name="hybrid", storage=url)).corrected  # doctest: +SKIP
    """
    if len(study.directions) != 1:
        return None
    values, _ = question_values(study.get_trials(deepcopy=False))
    if values.shape[0] < 2 or values.shape[1] < 2:
        return None
    maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
    return selection_corrected(values, maximize=maximize, seed=seed)


__all__ = ["VALUES_ATTR", "question_values", "record_question_values", "study_selection"]
