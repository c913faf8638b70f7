"""Every per-question value against trec_eval itself (pytrec_eval), to 1e-9.

Random graded qrels, runs with many tied scores and lists shorter than k.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import pytrec_eval

from sweep.metrics import evaluate
from sweep.metrics.trec import TrecQrels, TrecRun, trec_inputs

KS = (1, 3, 5, 10, 20)
OURS_TO_TREC = {"precision": "P", "recall": "recall", "hit_rate": "success", "ndcg": "ndcg_cut", "map": "map_cut"}


def random_case(seed: int, n_questions: int = 400):
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(n_questions):
        qid = f"q{q}"
        pool = [f"d{i:03d}" for i in range(rng.randint(5, 60))]
        judged = rng.sample(pool, rng.randint(1, min(12, len(pool))))
        qrels[qid] = {d: rng.choice([0, 0, 1, 1, 2, 3]) for d in judged}
        depth = rng.choice([0, 1, 2, 4, 7, 15, 30])
        # few distinct score values: ties everywhere
        run[qid] = {d: float(rng.randint(0, 4)) for d in rng.sample(pool, min(depth, len(pool)))}
    return qrels, {q: r for q, r in run.items() if r}


def as_trec(qrels, run):
    q = TrecQrels(
        [qid for qid, docs in qrels.items() for _ in docs],
        [d for docs in qrels.values() for d in docs],
        np.array([g for docs in qrels.values() for g in docs.values()], dtype=np.int64),
    )
    r = TrecRun(
        [qid for qid, docs in run.items() for _ in docs],
        [d for docs in run.values() for d in docs],
        np.array([s for docs in run.values() for s in docs.values()]),
    )
    return q, r


def our_names():
    names = ["mrr", "map", "r_precision"]
    return names + [f"{f}@{k}" for f in OURS_TO_TREC for k in KS]


def trec_name(ours: str) -> str:
    if "@" not in ours:
        return {"mrr": "recip_rank", "map": "map", "r_precision": "Rprec"}[ours]
    family, k = ours.split("@")
    return f"{OURS_TO_TREC[family]}_{k}"


@pytest.mark.parametrize("seed,threshold", [(0, 1), (1, 1), (2, 2)])
def test_every_value_matches_pytrec_eval(seed, threshold):
    qrels, run = random_case(seed)
    names = our_names()
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {trec_name(n) for n in names}, relevance_level=threshold)
    reference = evaluator.evaluate(run)

    matrix, labels = trec_inputs(*as_trec(qrels, run), threshold=threshold)
    ours = evaluate(matrix, labels, names).per_question()

    compared = 0
    for qid, values in reference.items():
        has_relevant = any(g >= threshold for g in qrels[qid].values())
        if not has_relevant:
            assert qid in labels.skipped  # excluded from means and reported
            continue
        for name in names:
            assert ours[qid][name] == pytest.approx(values[trec_name(name)], abs=1e-9), (qid, name)
            compared += 1
    assert compared >= 200 * len(names)
    # questions absent from the run: pytrec_eval skips them, we count them as 0
    for qid in set(labels.question_ids) - set(run):
        assert all(v == 0.0 for v in ours[qid].values())


def test_mrr_at_k_matches_recip_rank_of_the_cut_run():
    qrels, run = random_case(3)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    matrix, labels = trec_inputs(*as_trec(qrels, run))
    ours = evaluate(matrix, labels, ["mrr@5"]).per_question()
    # cut each run at 5 in trec_eval's order (score desc, docid desc), then score uncut
    cut = {q: dict(sorted(r.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:5]) for q, r in run.items()}
    for qid, values in evaluator.evaluate(cut).items():
        if qid in ours:
            assert ours[qid]["mrr@5"] == pytest.approx(values["recip_rank"], abs=1e-9)
