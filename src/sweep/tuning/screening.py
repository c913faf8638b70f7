"""Screening in a sweep: a trial's (model, chunking) pair scored on the BM25 pool first, and pruned
there, before its corpus is encoded, when the median rule says it is worse than the trials so far.

The pool score is reported to Optuna at step 0 (question batches report at the number of questions
seen, always more), so the rule compares it only with other trials' pool scores.
"""

from __future__ import annotations

import time

import optuna

from sweep.pipeline.screen import pool_score
from sweep.tuning.context import SweepContext

SCREEN_STEP = 0
# MedianPruner's rule, as the question batches use it, but never on fewer than 3 screened pairs
RULE = optuna.pruners.MedianPruner(n_startup_trials=3, n_min_trials=3)


def screen(sweep: SweepContext, trial: optuna.Trial, config) -> float:
    """Report ``trial``'s pool score; raise TrialPruned when its pair is screened out.

    A pair whose whole corpus already has vectors is never screened out (nothing would be saved:
    its full score is a few milliseconds away), but its pool score is reported for the others.

    Args:
        sweep: the running sweep (its pipeline and search settings).
        trial: the trial being evaluated.
        config: the trial's configuration.

    Returns:
        The seconds it took (the trial's time includes them).

    Raises:
        optuna.TrialPruned: the pool score is below the median of the finished trials' pool scores.
    """
    t = time.perf_counter()
    found = pool_score(sweep.pipeline, config, sweep.search.objective, sweep.search.screen.pool)
    if found is None:
        return 0.0
    trial.report(found.value, step=SCREEN_STEP)
    trial.set_user_attr("screen", {"value": found.value, "pool": found.pool, "chunks": found.chunks})
    frozen = next(f for f in trial.study.get_trials(deepcopy=False) if f.number == trial.number)
    # asked only when the rule prunes: counting the corpus's cached vectors reads every chunk's key
    if RULE.prune(trial.study, frozen) and _unencoded(sweep, config):
        trial.set_user_attr("questions_evaluated", 0)
        trial.set_user_attr("screened_out", True)
        trial.set_user_attr("seconds", time.perf_counter() - t)
        raise optuna.TrialPruned(
            f"screened out: {sweep.search.objective} {found.value:.4f} over a pool of {found.pool} "
            f"of {found.chunks} chunks, below the median of the trials so far"
        )
    return time.perf_counter() - t


def _unencoded(sweep: SweepContext, config) -> bool:
    """Whether some chunk of ``config``'s corpus has no vector yet (screening it out saves encoding)."""
    c = config.retrieval.dense
    texts = sweep.pipeline.prepare(config).index_texts
    return sweep.pipeline.encoder(c, config).missing(texts, c.document_prefix) > 0


__all__ = ["RULE", "SCREEN_STEP", "screen"]
