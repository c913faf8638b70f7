"""Ranking metric kernels with trec_eval's semantics, over sparse per-rank gains.

Each kernel maps a :class:`RankedGains` to one value per question. ``k=None``
means the whole run. Formulas and their trec_eval names:

* recall@k      items credited in top k / R                  (recall_k)
* precision@k   relevant ranks in top k / k                  (P_k; k even if fewer returned)
* hit_rate@k    1 if any relevant rank in top k              (success_k)
* mrr, mrr@k    1 / first relevant rank, 0 if none           (recip_rank; not cut unless @k)
* map, map@k    sum over credited items of precision at their rank / R   (map, map_cut_k)
* ndcg@k        DCG@k / IDCG@k, gain = grade, discount log2(rank + 1),
                IDCG from *all* judged evidence (Järvelin & Kekäläinen 2002;
                trec_eval's ndcg_cut)
* ndcg_exp@k    same with gain 2^grade - 1 (Burges et al. 2005), named apart
* r_precision   items credited in top R / R                  (Rprec)
* judged@k      judged ranks in top k / k, relevant or not     (ir_measures' Judged@k)
* bpref         per relevant item credited: 1 - min(n, R) / min(N, R), n the judged
                non-relevant items ranked above it, N all of them; summed / R
                (Buckley & Voorhees 2004; trec_eval's bpref). Unjudged ranks are ignored.
"""

from __future__ import annotations

import numpy as np

from sweep.metrics.gains import RankedGains


def _within(g: RankedGains, k: int | None) -> np.ndarray:
    return np.ones(len(g.rank), dtype=bool) if k is None else g.rank < k


def _per_question(g: RankedGains, mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    w = None if weights is None else weights[mask]
    return np.bincount(g.question[mask], weights=w, minlength=g.n_questions).astype(np.float64)


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros(num.shape, dtype=np.float64), where=den > 0)


def recall(g: RankedGains, k: int | None) -> np.ndarray:
    return _safe_div(_per_question(g, _within(g, k), g.credited), g.n_relevant)


def precision(g: RankedGains, k: int | None) -> np.ndarray:
    return _per_question(g, _within(g, k) & g.relevant) / (g.depth if k is None else k)


def hit_rate(g: RankedGains, k: int | None) -> np.ndarray:
    return (_per_question(g, _within(g, k) & g.relevant) > 0).astype(np.float64)


def reciprocal_rank(g: RankedGains, k: int | None) -> np.ndarray:
    mask = _within(g, k) & g.relevant
    q, rank = g.question[mask], g.rank[mask]
    out = np.zeros(g.n_questions)
    first = np.r_[True, q[1:] != q[:-1]] if len(q) else np.zeros(0, dtype=bool)  # entries sorted by (q, rank)
    out[q[first]] = 1.0 / (rank[first] + 1)
    return out


def average_precision(g: RankedGains, k: int | None) -> np.ndarray:
    rel = g.relevant
    q = g.question[rel]
    # relevant ranks so far in the same question (entries sorted by question, rank)
    group_start = np.flatnonzero(np.r_[True, q[1:] != q[:-1]]) if len(q) else np.zeros(0, dtype=np.int64)
    sizes = np.diff(np.r_[group_start, len(q)])
    seen = np.arange(len(q)) - np.repeat(group_start, sizes) + 1
    precision_at_rank = np.zeros(len(g.rank))
    precision_at_rank[rel] = seen / (g.rank[rel] + 1)
    return _safe_div(_per_question(g, _within(g, k), g.credited * precision_at_rank), g.n_relevant)


def _discount(depth: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, depth + 2))


def ndcg(g: RankedGains, k: int | None, exponential: bool = False) -> np.ndarray:
    gain, ideal = g.gain, g.ideal if k is None else g.ideal[:, :k]
    if exponential:
        gain, ideal = np.exp2(gain) - 1.0, np.exp2(ideal) - 1.0
    dcg = _per_question(g, _within(g, k), gain / np.log2(g.rank + 2))
    return _safe_div(dcg, ideal @ _discount(ideal.shape[1]))


def r_precision(g: RankedGains, k: int | None = None) -> np.ndarray:
    return _safe_div(_per_question(g, g.rank < g.n_relevant[g.question], g.credited), g.n_relevant)


def _judged(g: RankedGains):
    if g.judged is None:
        raise ValueError("judged@k and bpref need ranked_gains(..., judged=True)")
    return g.judged


def judged(g: RankedGains, k: int | None) -> np.ndarray:
    j = _judged(g)
    mask = np.ones(len(j.rank), bool) if k is None else j.rank < k
    return np.bincount(j.question[mask], minlength=g.n_questions) / (g.depth if k is None else k)


def bpref(g: RankedGains, k: int | None) -> np.ndarray:
    j = _judged(g)
    rel = g.credited > 0
    q, rank, weight = g.question[rel], g.rank[rel], g.credited[rel]
    above = np.searchsorted(j.nonrel_position, q * g.depth + rank) - np.searchsorted(
        j.nonrel_position, q * g.depth
    )
    r, n = g.n_relevant[q], j.n_nonrelevant[q]
    cap = np.minimum(n, r)
    lost = np.divide(np.minimum(above, r), cap, out=np.zeros(len(q)), where=cap > 0)
    preferred = np.bincount(q, weights=weight * (1.0 - lost), minlength=g.n_questions)
    return _safe_div(preferred, g.n_relevant.astype(np.float64))


KERNELS = {
    "recall": recall,
    "precision": precision,
    "hit_rate": hit_rate,
    "mrr": reciprocal_rank,
    "map": average_precision,
    "ndcg": ndcg,
    "ndcg_exp": lambda g, k: ndcg(g, k, exponential=True),
    "r_precision": r_precision,
    "judged": judged,
    "bpref": bpref,
}
NEEDS_K = {"recall", "precision", "hit_rate", "ndcg", "ndcg_exp", "judged"}
NO_K = {"r_precision", "bpref"}
NEED_JUDGED = {"judged", "bpref"}  # read the judged non-relevant ranks too
