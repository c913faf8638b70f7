"""How much of the best trial's tuning score is the luck of having picked it: bootstrap bias-corrected
selection (BBC-CV; Tsamardinos, Greasidou & Borboudakis, Machine Learning 107, 2018).

The best of N trials scored on the same questions that chose it reads high (the winner's curse): with
many trials, one is lucky on these questions. BBC resamples the questions with replacement, picks the
best trial on each resample as the sweep did, and scores that pick on the questions the resample left
out; the mean of those out-of-bag scores estimates what picking the best delivers on new questions,
their percentiles its interval. It needs only each trial's per-question values: no trial is re-run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.analysis.significance import CONFIDENCE, _resampled_means

N_SELECTION_RESAMPLES = 1_000  # as in the paper; each costs one (trials x questions) product


@dataclass(frozen=True)
class SelectionEstimate:
    """The best trial's tuning score beside what selecting it is expected to score on new questions."""

    naive: float  # the best trial's mean over every tuning question (what the sweep reports as best)
    corrected: float  # BBC: mean out-of-bag score of the trial picked on each resample
    low: float  # the corrected estimate's percentile interval
    high: float
    trials: int
    questions: int
    resamples: int  # those with at least one out-of-bag question

    @property
    def optimism(self) -> float:
        """How much the naive best overstates the selection (positive: it reads high)."""
        return self.naive - self.corrected

    def to_json(self) -> dict:
        return dict(self.__dict__)

    def describe(self, objective: str) -> str:
        """One line for the summary and the report."""
        return (
            f"corrected for picking the best of {self.trials} trials (BBC, {self.resamples} resamples of "
            f"{self.questions} questions): {objective} {self.corrected:.4f} [{self.low:.4f}, {self.high:.4f}]; "
            f"the best trial's {self.naive:.4f} reads {self.optimism:+.4f} high"
        )


def selection_corrected(
    values,
    *,
    maximize: bool = True,
    n_resamples: int = N_SELECTION_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> SelectionEstimate:
    """BBC estimate of the best trial's score, from every trial's per-question values.

    Resamples are drawn in blocks, so memory stays flat whatever the number of questions.

    Args:
        values: ``(trials, questions)``: each trial's objective per tuning question, one question
            order for all.
        maximize: whether larger is better (the study's direction).
        n_resamples: bootstrap resamples of the questions.
        confidence: the interval's coverage.
        seed: the generator's seed; the same seed gives the same estimate.

    Returns:
        :class:`SelectionEstimate`.

    Example:
        >>> e = selection_corrected([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]], n_resamples=200)
        >>> e.naive, round(e.corrected, 2) < e.naive
        (0.5, True)
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] < 1 or v.shape[1] < 2:
        raise ValueError(f"selection needs (trials, questions) values with 2+ questions, got shape {v.shape}")
    n_trials, n_q = v.shape
    sign = 1.0 if maximize else -1.0
    means = v.mean(axis=1)
    naive = float(means[np.argmax(sign * means)])
    rng = np.random.default_rng(seed)

    def out_of_bag(rows: int) -> np.ndarray:
        """One block of resamples: each one's pick scored on the questions it left out."""
        drawn = rng.integers(0, n_q, size=(rows, n_q))
        counts = np.bincount((np.arange(rows)[:, None] * n_q + drawn).ravel(), minlength=rows * n_q)
        counts = counts.reshape(rows, n_q).astype(np.float64)
        picked = np.argmax(sign * (counts @ v.T), axis=1)  # the best trial on each resample (ties: first)
        out = counts == 0
        n_out = out.sum(axis=1)
        keep = n_out > 0
        return (v[picked] * out).sum(axis=1)[keep] / n_out[keep]

    oob_scores = _resampled_means(n_resamples, n_q, out_of_bag)  # blocks of ~2M drawn values
    tail = (1 - confidence) / 2
    low, high = np.quantile(oob_scores, [tail, 1 - tail])
    return SelectionEstimate(
        naive, float(oob_scores.mean()), float(low), float(high), n_trials, n_q, len(oob_scores)
    )


__all__ = ["N_SELECTION_RESAMPLES", "SelectionEstimate", "selection_corrected"]
