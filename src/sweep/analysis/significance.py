"""How sure we are: bootstrap intervals and paired tests over per-question values.

Questions are the unit of sampling (Sakai, "Statistical Reform in IR", and
Smucker, Allan & Carterette 2007): a mean's interval resamples questions
with replacement; two configurations are compared on the same questions,
pairwise, with the randomisation (sign-flip) test and the paired t-test.
Many comparisons at once get Holm's step-down correction. Everything is
seeded so a report reads the same twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

N_RESAMPLES = 10_000
CONFIDENCE = 0.95


BLOCK_VALUES = 1 << 21  # values drawn per block: ~32 MB for the indices and ~32 MB for what they pick


def _block_rows(n: int) -> int:
    """Resamples per block: a multiple of 4, so that NumPy's buffered small-integer draws split
    into blocks give exactly the stream one big draw would (same seed, same values)."""
    return max(4, BLOCK_VALUES // max(n, 1) // 4 * 4)


def _resampled_means(n_resamples: int, n: int, draw) -> np.ndarray:
    """``draw(rows)`` → a ``(rows, n)`` resample's row means, block by block: memory stays flat
    whatever the number of questions, where one ``(n_resamples, n)`` draw needs 8 GB at 50,000."""
    step = _block_rows(n)
    return np.concatenate([draw(min(step, n_resamples - s)) for s in range(0, n_resamples, step)])


def bootstrap_ci(
    values, *, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, resampling questions with replacement.

    Args:
        values: one value per question.
        n_resamples: bootstrap resamples.
        confidence: the interval's coverage.
        seed: the generator's seed; the same seed gives the same interval.

    Returns:
        ``(low, high)``; NaNs for no values.

    Example:
        >>> bootstrap_ci([1.0, 1.0, 1.0])
        (1.0, 1.0)
    """
    x = np.asarray(values, dtype=np.float64)
    if len(x) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = _resampled_means(
        n_resamples, len(x), lambda rows: x[rng.integers(0, len(x), size=(rows, len(x)))].mean(axis=1)
    )
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return (float(lo), float(hi))


def paired_randomization(a, b, *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> float:
    """Two-sided p-value of mean(b - a) = 0: flip the sign of each question's difference at random.

    The observed assignment counts as one of the resamples, so p is never 0
    and identical runs give exactly 1.

    Args:
        a: per-question values of the first configuration.
        b: the second's, on the same questions in the same order.
        n_resamples: random sign assignments.
        seed: the generator's seed.

    Returns:
        The p-value in (0, 1].

    Example:
        >>> paired_randomization([0.1, 0.2], [0.1, 0.2])
        1.0
    """
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    return _sign_flip_p(d, n_resamples, seed, two_sided=True) if len(d) else 1.0


def _sign_flip_p(d: np.ndarray, n_resamples: int, seed: int, two_sided: bool) -> float:
    """The share of random sign assignments of ``d`` whose mean is as extreme as the observed one
    (``|mean|`` when two-sided, the mean itself otherwise), the observed one counted among them."""
    fold = np.abs if two_sided else (lambda x: x)
    observed = fold(d.mean())
    rng = np.random.default_rng(seed)

    def flipped(rows: int) -> np.ndarray:
        signs = rng.integers(0, 2, size=(rows, len(d)), dtype=np.int8) * 2 - 1
        return fold((signs * d).mean(axis=1))

    extreme = np.count_nonzero(_resampled_means(n_resamples, len(d), flipped) >= observed - 1e-12)
    return float((extreme + 1) / (n_resamples + 1))


def paired_t_test(a, b) -> float:
    """Two-sided p-value of the paired t-test; 1 when nothing differs, 0 when every difference is the same non-zero."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if len(d) < 2 or np.allclose(d, d[0], atol=1e-15):
        return 1.0 if len(d) == 0 or abs(d[0]) < 1e-15 else 0.0
    t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    return float(2 * stats.t.sf(abs(t), df=len(d) - 1))


def non_inferiority(
    a, b, margin: float, *, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """One-sided p-values of "b is worse than a by ``margin`` or more" (H0: mean(b - a) <= -margin).

    A small p says b is not worse by that much. The randomisation test flips the signs of the
    shifted differences ``b - a + margin``; the t-test is scipy's one-sample test on them
    (``alternative="greater"``). With ``margin`` 0 this asks for proof that b is better.

    Args:
        a: per-question values of the baseline.
        b: the candidate's, on the same questions in the same order.
        margin: the largest drop of the mean that still counts as not worse (>= 0).
        n_resamples: random sign assignments.
        seed: the generator's seed.

    Returns:
        ``(p_randomisation, p_t_test)``, each in [0, 1].

    Example:
        >>> non_inferiority([0.5] * 8, [0.5] * 8, 0.01, seed=0)[0] < 0.01
        True
    """
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64) + margin
    if len(d) == 0:
        return 1.0, 1.0
    p_rand = _sign_flip_p(d, n_resamples, seed, two_sided=False)
    if len(d) < 2 or np.allclose(d, d[0], atol=1e-15):  # no spread: the sign of the shift decides
        p_t = 0.0 if d.mean() > 1e-15 else 1.0
    else:
        p_t = float(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
    return p_rand, p_t


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (same order as given)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order]).clip(max=1.0)
    out = np.empty(m)
    out[order] = adjusted
    return out


@dataclass(frozen=True)
class PairedComparison:
    """B against A on one metric, over the same questions."""

    a: float
    b: float
    delta: float
    ci: tuple[float, float]  # bootstrap interval of the mean difference
    p_value: float  # randomisation test
    p_t_test: float
    p_holm: float | None = None

    def to_json(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "delta": self.delta,
            "ci": list(self.ci),
            "p_value": self.p_value,
            "p_t_test": self.p_t_test,
            "p_holm": self.p_holm,
        }

    @property
    def significant(self) -> bool:
        p = self.p_holm if self.p_holm is not None else self.p_value
        return p < 0.05 and not (self.ci[0] <= 0 <= self.ci[1])


def compare_paired(a, b, *, seed: int = 0) -> PairedComparison:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    d = b - a
    return PairedComparison(
        float(a.mean()),
        float(b.mean()),
        float(d.mean()),
        bootstrap_ci(d, seed=seed),
        paired_randomization(a, b, seed=seed),
        paired_t_test(a, b),
    )


def compare_many(
    pairs: dict[str, tuple[np.ndarray, np.ndarray]], *, seed: int = 0
) -> dict[str, PairedComparison]:
    """Compare on several metrics at once; p_holm corrects for the number of metrics."""
    out = {name: compare_paired(a, b, seed=seed) for name, (a, b) in pairs.items()}
    if out:
        adjusted = holm([c.p_value for c in out.values()])
        out = {
            name: PairedComparison(**{**c.__dict__, "p_holm": float(p)})
            for (name, c), p in zip(out.items(), adjusted)
        }
    return out
