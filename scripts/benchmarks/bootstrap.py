"""Peak memory of one bootstrap interval and one paired test over 50,000 questions."""

from __future__ import annotations

import numpy as np

from benchmarks.common import timed


def bench_bootstrap(n_q: int = 50_000) -> dict:
    """Peak memory (tracemalloc: NumPy's arrays are traced) of one bootstrap interval and one paired
    randomisation test at 50,000 questions, 10,000 resamples each, and their times."""
    import tracemalloc

    from sweep.analysis.significance import bootstrap_ci, paired_randomization

    rng = np.random.default_rng(0)
    a, b = rng.random(n_q), rng.random(n_q)
    tracemalloc.start()
    wall, cpu, _ = timed(lambda: (bootstrap_ci(b - a), paired_randomization(a, b)), repeat=3)
    peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    one_shot_mb = 10_000 * n_q * (8 + 8) / 2**20  # a whole (resamples, questions) index and value matrix
    print(
        f"bootstrap interval + paired randomisation test, {n_q:,} questions x 10,000 resamples: "
        f"peak {peak_mb:.0f} MB extra (one whole draw would need {one_shot_mb:,.0f} MB); "
        f"median {wall:.1f} s wall, {cpu:.1f} s CPU of 3"
    )
    return {"bootstrap_mb_50k_questions": peak_mb, "bootstrap_50k_s": wall}
