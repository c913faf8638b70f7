"""Intervals, paired tests, comparisons and the recall-curve diagnosis, on planted data."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy import stats

from sweep.analysis.compare import compare_scores, read_scores
from sweep.analysis.diagnostics import diagnose
from sweep.analysis.significance import bootstrap_ci, holm, paired_randomization, paired_t_test
from sweep.cli import main
from sweep.metrics import Scores, evaluate
from sweep.metrics.curve import recall_curve


def planted(n_better: int = 30, n: int = 40, seed: int = 7):
    """B beats A by 0.05–0.3 on the first ``n_better`` questions and ties on the rest."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.1, 0.6, n)
    b = a.copy()
    b[:n_better] += rng.uniform(0.05, 0.3, n_better)
    return a, b


def test_a_run_better_on_30_of_40_questions_is_significant():
    a, b = planted()
    assert paired_randomization(a, b) < 0.01
    assert paired_t_test(a, b) < 0.01
    lo, hi = bootstrap_ci(b - a)
    assert 0 < lo < (b - a).mean() < hi


def test_identical_runs_give_p_1_and_an_interval_around_0():
    a, _ = planted()
    assert paired_randomization(a, a) == 1.0
    assert paired_t_test(a, a) == 1.0
    assert bootstrap_ci(a - a) == (0.0, 0.0)


def test_randomization_test_matches_exact_enumeration():
    rng = np.random.default_rng(3)
    d = rng.normal(0.1, 0.3, 12)
    flips = np.array(list(itertools.product([-1, 1], repeat=12)))
    exact = np.mean(np.abs((flips * d).mean(axis=1)) >= abs(d.mean()) - 1e-12)
    assert paired_randomization(np.zeros(12), d, n_resamples=20_000) == pytest.approx(exact, abs=0.01)


def test_t_test_matches_scipy():
    a, b = planted(20)
    assert paired_t_test(a, b) == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-9)


def test_bootstrap_interval_matches_normal_theory_for_a_large_sample():
    x = np.random.default_rng(0).normal(0.5, 0.2, 2000)
    lo, hi = bootstrap_ci(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert lo == pytest.approx(x.mean() - half, abs=0.15 * half)
    assert hi == pytest.approx(x.mean() + half, abs=0.15 * half)


def test_resampling_in_blocks_gives_the_values_of_one_whole_draw(monkeypatch):
    """The reference is the one-shot formula (a resamples x questions matrix at once); blocks of a
    few rows, with an odd number of questions, must reproduce its stream and so its values exactly."""
    import sweep.analysis.significance as significance

    monkeypatch.setattr(significance, "BLOCK_VALUES", 4 * 1001 + 17)  # 4-row blocks, the last one short
    a = np.zeros(1001)
    b = d = np.random.default_rng(1).normal(0.01, 0.3, 1001)  # p near 0.3: the draws decide it
    rng = np.random.default_rng(5)
    means = d[rng.integers(0, len(d), size=(999, len(d)))].mean(axis=1)
    assert bootstrap_ci(d, n_resamples=999, seed=5) == tuple(np.quantile(means, [0.025, 0.975]))
    rng = np.random.default_rng(5)
    signs = rng.integers(0, 2, size=(999, len(d)), dtype=np.int8) * 2 - 1
    extreme = np.count_nonzero(np.abs((signs * d).mean(axis=1)) >= abs(d.mean()) - 1e-12)
    assert 100 < extreme < 900
    assert paired_randomization(a, b, n_resamples=999, seed=5) == (extreme + 1) / 1000
    assert significance._block_rows(1001) == 4


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.2 -> x4, x3, x2, x1 = 0.04, 0.09, 0.08 -> 0.09 (monotone), 0.2
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def scores_pair():
    """40 questions; B improves q0..q29 except the planted regressions q30, q33, q36."""
    ids = [f"q{i}" for i in range(40)]
    a, b = planted()
    b[[30, 33, 36]] = a[[30, 33, 36]] - 0.2
    rr_a = np.where(np.arange(40) % 2 == 0, 1 / 3, 0.0)
    rr_b = np.where(np.arange(40) < 30, 1.0, rr_a)
    texts = {q: f"question {q}" for q in ids}
    return (
        Scores(ids, {"ndcg@10": a, "mrr": rr_a}, [], texts),
        Scores(ids, {"ndcg@10": b, "mrr": rr_b}, [], texts),
    )


def test_compare_lists_exactly_the_planted_regressions():
    a, b = scores_pair()
    c = compare_scores(a, b)
    assert {q.question_id for q in c.regressed} == {"q30", "q33", "q36"}
    assert {q.question_id for q in c.improved} == {f"q{i}" for i in range(30)}
    first = next(q for q in c.improved if q.question_id == "q0")
    assert (first.rank_a, first.rank_b) == (3, 1)
    assert next(q for q in c.improved if q.question_id == "q1").rank_a is None  # nothing relevant retrieved
    assert c.metrics["ndcg@10"].p_value < 0.01 and c.metrics["ndcg@10"].ci[0] > 0


def test_compare_command_writes_the_documented_json(tmp_path, capsys):
    a, b = scores_pair()
    a.write_json(tmp_path / "a.json")
    b.write_json(tmp_path / "b.json")
    assert read_scores(tmp_path / "a.json").texts["q3"] == "question q3"
    assert (
        main(
            [
                "compare",
                str(tmp_path / "a.json"),
                str(tmp_path / "b.json"),
                "--json",
                str(tmp_path / "c.json"),
            ]
        )
        == 0
    )
    out = json.loads((tmp_path / "c.json").read_text())
    m = out["metrics"]["ndcg@10"]
    assert {"a", "b", "delta", "ci", "p_value"} <= set(m)
    assert m["delta"] == pytest.approx(m["b"] - m["a"]) and m["ci"][0] < m["delta"] < m["ci"][1]
    assert sorted(out["regressed"]) == ["q30", "q33", "q36"] and len(out["improved"]) == 30
    printed = capsys.readouterr().out
    assert "3 question(s) regressed" in printed and "question q30" in printed


def test_compare_errors_are_clear(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["compare", str(tmp_path / "bad.json"), str(tmp_path / "missing.json")]) == 2
    assert "not a JSON result file" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "nope.json"), str(tmp_path / "bad.json")]) == 2
    assert "no such result file" in capsys.readouterr().err


def test_recall_curve_equals_recall_at_each_k():
    from conftest import doc_level

    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}}
    rankings = {"q1": ["x", "a", "y", "b"], "q2": ["c", "z"]}
    run, labels = doc_level(qrels, rankings)
    curve = recall_curve(run, labels)
    assert curve.tolist() == pytest.approx([0.5, 0.75, 0.75, 1.0][: run.shape[1]])
    for k in range(1, len(curve) + 1):
        assert curve[k - 1] == pytest.approx(
            evaluate(run, labels, [f"recall@{k}"]).values[f"recall@{k}"].mean()
        )


@pytest.mark.parametrize(
    "curve,means,kind",
    [
        (np.linspace(0.1, 0.5, 100), {}, "upstream"),  # never found
        (np.r_[[0.2, 0.3, 0.35], np.linspace(0.85, 0.95, 97)], {}, "ranking"),  # found, ranked low
        (np.r_[[0.7, 0.85, 0.9], np.full(97, 0.97)], {"precision@20": 0.08, "recall@20": 0.97}, "precision"),
        (np.r_[[0.6, 0.7, 0.75], np.full(97, 0.78)], {"precision@20": 0.3}, "healthy"),
    ],
)
def test_diagnosis_reads_the_curve(curve, means, kind):
    findings = diagnose(curve, means, top_k=20)
    assert findings[0].kind == kind
