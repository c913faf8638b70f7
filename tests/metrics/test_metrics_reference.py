"""Every row of ../shared/docs/metrics-reference.md, as a test.

Values there were computed with pytrec_eval, ranx and ir-measures; the
hand calculations are repeated in comments where they are short.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import doc_level, measure
from sweep.metrics import evaluate
from sweep.metrics.runfiles import TrecQrels, TrecRun
from sweep.metrics.trec import trec_inputs

approx = lambda v: pytest.approx(v, abs=5e-5)  # noqa: E731  (the document rounds to 4 places)


def ranking(pattern: str) -> tuple[dict[str, int], list[str]]:
    """'RNNRN' -> judged relevant docs r0.. and a ranking of them interleaved with non-relevant ones."""
    docs = [f"{'r' if c == 'R' else 'n'}{i}" for i, c in enumerate(pattern)]
    return {d: 1 for d in docs if d.startswith("r")}, docs


# --- worked examples -------------------------------------------------------


def test_ap_two_relevant():
    qrels, docs = ranking("RNNRN")
    assert measure({"q": qrels}, {"q": docs}, "map")["q"] == pytest.approx(0.75)  # (1/1 + 2/4) / 2


def test_ap_three_relevant_one_never_retrieved():
    qrels, docs = ranking("NRRNN")
    qrels["unretrieved"] = 1
    assert measure({"q": qrels}, {"q": docs}, "map")["q"] == pytest.approx((1 / 2 + 2 / 3) / 3)


NDCG_QRELS = {"d1": 3, "d2": 2, "d3": 0, "d4": 1, "d5": 3}
NDCG_RUN = ["d1", "d2", "d3", "d4", "d5"]  # grades [3, 2, 0, 1, 3]; ideal [3, 3, 2, 1, 0]


def test_ndcg5_linear_gain():
    assert measure({"q": NDCG_QRELS}, {"q": NDCG_RUN}, "ndcg@5")["q"] == approx(0.9256)
    dcg = 3 + 2 / np.log2(3) + 0 + 1 / np.log2(5) + 3 / np.log2(6)
    idcg = 3 + 3 / np.log2(3) + 2 / np.log2(4) + 1 / np.log2(5)
    assert dcg == approx(5.8531) and idcg == approx(6.3235)


def test_ndcg5_exponential_gain_is_its_own_metric():
    assert measure({"q": NDCG_QRELS}, {"q": NDCG_RUN}, "ndcg_exp@5")["q"] == approx(0.9014)


def test_mrr_mean():
    qrels = {f"q{i}": {"rel": 1} for i in range(3)}
    runs = {"q0": ["rel", "a", "b"], "q1": ["a", "b", "c", "rel"], "q2": ["a", "rel"]}
    values = measure(qrels, runs, "mrr")
    assert np.mean(list(values.values())) == pytest.approx((1 + 1 / 4 + 1 / 2) / 3)


def test_recall5():
    qrels = {"q": {f"r{i}": 1 for i in range(5)}}
    assert measure(qrels, {"q": ["r0", "x", "r1", "y", "r2", "r3"]}, "recall@5")["q"] == pytest.approx(0.6)


def test_precision5():
    assert measure({"q": {"a": 1, "b": 1}}, {"q": ["a", "x", "b", "y", "z"]}, "precision@5")["q"] == 0.4


def test_hit_rate5_mean():
    qrels = {f"q{i}": {"rel": 1} for i in range(5)}
    runs = {f"q{i}": ["a", "b", "rel"] for i in range(4)} | {"q4": ["a", "b", "c", "d", "e", "rel"]}
    assert np.mean(list(measure(qrels, runs, "hit_rate@5").values())) == pytest.approx(0.8)


# --- edge cases ------------------------------------------------------------


def test_idcg_comes_from_all_judged_docs_not_the_retrieved_list():
    # LlamaIndex #17070 built IDCG from the retrieved list and got 1.0
    value = measure({"q": {"d1": 3, "d2": 2, "d3": 1}}, {"q": ["d2", "d3", "x", "y", "z"]}, "ndcg@5")["q"]
    assert value == approx(0.5525)


def test_idcg_is_cut_at_k():
    qrels = {"q": {f"r{i}": 1 for i in range(8)}}
    run = {"q": [f"r{i}" for i in range(5)]}
    assert measure(qrels, run, "ndcg@5")["q"] == pytest.approx(1.0)
    # uncut NDCG (IDCG over all 8): ndcg@100 is uncut here since 8 < 100
    assert measure(qrels, run, "ndcg@100")["q"] == approx(0.7458)


def test_gains_are_linear_by_default():
    qrels = {"q": {"d1": 3, "d2": 1, "d3": 2}}
    run = {"q": ["d2", "d1", "d4", "d3", "d5"]}
    assert measure(qrels, run, "ndcg@5")["q"] == approx(0.7884)
    assert measure(qrels, run, "ndcg_exp@5")["q"] == approx(0.7142)


def test_precision_denominator_is_k_even_with_fewer_results():
    assert measure({"q": {"a": 1, "b": 1}}, {"q": ["a", "b"]}, "precision@5")["q"] == pytest.approx(0.4)


def test_map_keeps_denominator_r_when_cut():
    qrels = {"q": {f"r{i}": 1 for i in range(10)}}
    run = {"q": ["r0", "r1", "r2", "r3", "r4", "n5", "n6", "n7", "n8", "r5"]}
    assert measure(qrels, run, "map")["q"] == approx(0.56)
    assert measure(qrels, run, "map@5")["q"] == approx(0.50)
    assert measure(qrels, run, "map@10")["q"] == approx(0.56)


def test_mrr_is_not_cut_unless_asked():
    run = {"q": ["a", "b", "c", "d", "e", "f", "rel"]}
    assert measure({"q": {"rel": 1}}, run, "mrr")["q"] == approx(0.1429)
    assert measure({"q": {"rel": 1}}, run, "mrr@5")["q"] == 0.0


def test_hit_rate_is_a_rate_not_a_count():
    run = {"q": [f"d{i}" for i in range(1, 11)]}
    assert measure({"q": {"d1": 1, "d3": 1, "d8": 1}}, run, "hit_rate@5")["q"] == 1.0


def test_ties_follow_trec_eval_docid_descending():
    qrels = TrecQrels(["q"], ["a"], np.array([1]))
    run = TrecRun(["q", "q"], ["a", "b"], np.array([1.0, 1.0]))  # equal scores: b ranks first
    matrix, labels = trec_inputs(qrels, run)
    assert evaluate(matrix, labels, ["mrr"]).values["mrr"][0] == 0.5


def test_graded_threshold():
    qrels = {"q": {"d1": 1, "d2": 2, "d3": 0}}
    run = {"q": ["d1", "d2", "d3"]}
    assert measure(qrels, run, "precision@5", threshold=2)["q"] == pytest.approx(0.2)
    assert measure(qrels, run, "mrr", threshold=2)["q"] == pytest.approx(0.5)
    assert measure(qrels, run, "map", threshold=2)["q"] == pytest.approx(0.5)
    # trec_eval's NDCG ignores the threshold (ranx's does not and gives 0.6309)
    assert measure(qrels, run, "ndcg@5", threshold=2)["q"] == approx(0.8597)


def test_question_without_relevant_evidence_is_excluded_and_reported():
    run, labels = doc_level({"ok": {"a": 1}, "none": {"a": 0, "b": 0}}, {"ok": ["a"], "none": ["a"]})
    scores = evaluate(run, labels, ["ndcg@5"])
    assert scores.question_ids == ["ok"]
    assert scores.skipped == ["none"]
    assert scores.mean()["ndcg@5"] == 1.0


def test_question_missing_from_run_counts_zero():
    run, labels = doc_level({"found": {"a": 1}, "lost": {"a": 1}}, {"found": ["a"]})
    scores = evaluate(run, labels, ["recall@5", "mrr", "ndcg@5"])
    assert scores.question_ids == ["found", "lost"]
    assert scores.per_question()["lost"] == {"recall@5": 0.0, "mrr": 0.0, "ndcg@5": 0.0}
    assert scores.mean()["mrr"] == 0.5


# --- peer bugs, one regression test each --------------------------------------


def test_duplicates_in_a_ranking_cannot_exceed_one():
    # LlamaIndex PR #22683, Haystack PR #11959: the same relevant id twice
    from sweep.labels import Labels

    labels = Labels(
        question_ids=["q"],
        n_chunks=3,
        pair_key=np.array([0]),
        pair_item=np.array([0]),
        item_question=np.array([0]),
        item_grade=np.array([1]),
        item_doc=np.array([0]),
        item_start=np.array([0]),
        item_end=np.array([1]),
        threshold=1,
        skipped=[],
    )
    run = np.array([[0, 0, 0, 1, 2]])
    scores = evaluate(run, labels, ["hit_rate@5", "map", "ndcg@5", "precision@5", "recall@5"]).mean()
    assert scores == {"hit_rate@5": 1.0, "map": 1.0, "ndcg@5": 1.0, "precision@5": 0.2, "recall@5": 1.0}


def test_ndcg_not_inflated_when_fewer_than_k_results():
    # MLflow #24541: 1 of 3 relevant returned, nothing else; IDCG still over 3
    value = measure({"q": {"a": 1, "b": 1, "c": 1}}, {"q": ["a"]}, "ndcg@10")["q"]
    assert value == pytest.approx(1 / (1 + 1 / np.log2(3) + 1 / np.log2(4)))


def test_mrr_is_per_question_not_per_evidence_group():
    # AutoRAG #386/#390 averaged reciprocal ranks over ground-truth groups
    value = measure({"q": {"a": 1, "b": 1}}, {"q": ["x", "a", "y", "b"]}, "mrr")["q"]
    assert value == 0.5


def test_result_equal_to_query_id_is_not_dropped():
    # BEIR #187 silently removed hits whose id equalled the query id
    assert measure({"d1": {"d1": 1}}, {"d1": ["d1"]}, "recall@1")["d1"] == 1.0


def test_question_order_does_not_matter():
    # ranx evaluating raw dicts with queries in a different order gave 0
    qrels = {"a": {"x": 1}, "b": {"y": 1}}
    forward = measure(qrels, {"a": ["x"], "b": ["z", "y"]}, "mrr")
    backward = measure(qrels, {"b": ["z", "y"], "a": ["x"]}, "mrr")
    assert forward == backward == {"a": 1.0, "b": 0.5}
