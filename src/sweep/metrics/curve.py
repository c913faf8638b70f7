"""The recall@k curve over a configuration's whole candidate list: would a bigger k help?"""

from __future__ import annotations

import numpy as np

from sweep.labels import Labels
from sweep.metrics.gains import ranked_gains
from sweep.metrics.ranking import recall

MAX_K = 100


def recall_curve(run: np.ndarray, labels: Labels, max_k: int = MAX_K) -> np.ndarray:
    """Mean recall@k for k = 1..min(max_k, depth of the run)."""
    run = np.asarray(run)
    depth = min(max_k, run.shape[1] if run.ndim == 2 else 0)
    if depth == 0 or len(labels.question_ids) == 0:
        return np.zeros(0)
    gains = ranked_gains(run[:, :depth], labels)
    return np.array([recall(gains, k).mean() for k in range(1, depth + 1)])


__all__ = ["MAX_K", "recall_curve"]
