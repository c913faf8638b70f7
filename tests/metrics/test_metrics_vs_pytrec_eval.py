"""Every per-question value against trec_eval itself (pytrec_eval), to 1e-9.

Random graded qrels, runs with many tied scores and lists shorter than k.
"""

from __future__ import annotations

import random
from types import MappingProxyType

import pytest
import pytrec_eval

from sweep import DataError, score
from sweep.metrics import runfiles

KS = (1, 3, 5, 10, 20)
OURS_TO_TREC = {
    "precision": "P",
    "recall": "recall",
    "hit_rate": "success",
    "ndcg": "ndcg_cut",
    "map": "map_cut",
}


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
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {trec_name(n) for n in names}, relevance_level=threshold
    )
    reference = evaluator.evaluate(run)

    scores = score(qrels, run, names, threshold=threshold)  # the public path, from pytrec_eval's own dicts
    ours = scores.per_question()

    compared = 0
    for qid, values in reference.items():
        has_relevant = any(g >= threshold for g in qrels[qid].values())
        if not has_relevant:
            assert qid in scores.skipped  # excluded from means and reported
            continue
        for name in names:
            assert ours[qid][name] == pytest.approx(values[trec_name(name)], abs=1e-9), (qid, name)
            compared += 1
    assert compared >= 200 * len(names)
    # questions absent from the run: pytrec_eval skips them, we count them as 0
    for qid in set(scores.question_ids) - set(run):
        assert all(v == 0.0 for v in ours[qid].values())


def test_mrr_at_k_matches_recip_rank_of_the_cut_run():
    qrels, run = random_case(3)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    ours = score(qrels, run, ["mrr@5"]).per_question()
    # cut each run at 5 in trec_eval's order (score desc, docid desc), then score uncut
    cut = {
        q: dict(sorted(r.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:5]) for q, r in run.items()
    }
    for qid, values in evaluator.evaluate(cut).items():
        if qid in ours:
            assert ours[qid]["mrr@5"] == pytest.approx(values["recip_rank"], abs=1e-9)


def test_a_ranked_list_is_scored_in_its_own_order_and_files_equal_dicts(tmp_path):
    qrels, run = random_case(4, n_questions=60)
    trec_order = {
        q: [d for d, _ in sorted(r.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]
        for q, r in run.items()
    }
    names = our_names()
    assert score(qrels, trec_order, names).per_question() == score(qrels, run, names).per_question()
    read_only = {q: MappingProxyType(d) for q, d in run.items()}  # any Mapping, not only dict
    assert (
        score(MappingProxyType(qrels), read_only, names).per_question()
        == score(qrels, run, names).per_question()
    )
    reversed_lists = {
        q: docs[::-1] for q, docs in trec_order.items()
    }  # a list is never re-sorted by a tie rule
    strict = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in reversed_lists.items()}
    assert score(qrels, reversed_lists, names).per_question() == score(qrels, strict, names).per_question()
    (tmp_path / "q").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    (tmp_path / "r").write_text(
        "".join(f"{q} Q0 {d} 0 {s!r} t\n" for q, docs in run.items() for d, s in docs.items())
    )
    assert (
        score(tmp_path / "q", str(tmp_path / "r"), names).per_question()
        == score(qrels, run, names).per_question()
    )


def test_files_with_any_whitespace_in_any_line_order_score_as_their_dicts(tmp_path, monkeypatch):
    """Tabs, runs of spaces, CRLF, indented and blank lines, questions interleaved, non-ASCII ids, a
    question only the run has and one the run lacks: the file reader must see what ``split()`` sees."""
    qrels, run = random_case(7, n_questions=80)
    qrels = {q: {d + "é": g for d, g in docs.items()} for q, docs in qrels.items()}
    run = {q: {d + "é": s for d, s in docs.items()} for q, docs in run.items() if q != "q3"}
    run["only-in-run"] = {"d000é": 1.0}
    seps = [" ", "\t", "  ", " \t "]
    rng = random.Random(1)
    qrel_lines = [f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items()]
    run_lines = [f"{q} Q0 {d} 9 {s!r} t" for q, docs in run.items() for d, s in docs.items()]
    rng.shuffle(run_lines)

    def messy(lines: list[str]) -> str:
        out = []
        for line in lines:
            out.append(rng.choice(["", " ", "\t"]) + rng.choice(seps).join(line.split(" ")))
            out[-1] += rng.choice(["", " ", "\t"]) + rng.choice(["\n", "\r\n", "\n\n", "\n  \n"])
        return "".join(out)

    (tmp_path / "q").write_text(messy(qrel_lines), encoding="utf-8", newline="")
    (tmp_path / "r").write_text(messy(run_lines), encoding="utf-8", newline="")
    names = our_names()
    for slow in ("read_qrels", "read_run"):  # the one-pass reader takes these files, not the line reader
        monkeypatch.setattr(runfiles, slow, lambda path: pytest.fail(f"{path} went line by line"))
    from_files = score(tmp_path / "q", tmp_path / "r", names)
    from_dicts = score(qrels, run, names)
    assert from_files.per_question() == from_dicts.per_question()
    assert from_files.skipped == from_dicts.skipped and "only-in-run" in from_dicts.skipped
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {trec_name(n) for n in names})
    for qid, values in evaluator.evaluate(run).items():
        if qid in from_files.question_ids:
            assert from_files.per_question()[qid]["map"] == pytest.approx(values["map"], abs=1e-12)


def test_a_qrels_file_that_judges_a_pair_twice_names_the_line(tmp_path):
    (tmp_path / "q").write_text("q1 0 d1 1\nq1 0 d2 0\nq1 0 d1 2\n")
    (tmp_path / "r").write_text("q1 Q0 d1 1 1.0 t\n")
    with pytest.raises(DataError, match=r"line 3.*duplicate qrel|duplicate qrel.*line 3|:3"):
        score(tmp_path / "q", tmp_path / "r", ["mrr"])


@pytest.mark.parametrize(
    "qrels,run,says",
    [
        ({}, {"q": {"d": 1.0}}, "qrels are empty"),
        ({"q": {"d": "high"}}, {"q": {"d": 1.0}}, "grades must be integers"),
        ({"q": {"d": 1}}, {"q": {"d": float("nan")}}, "NaN or infinite"),
        ({"q": {"d": 1}}, {"q": {"d": "x"}}, "scores must be numbers"),
        ({"q": {"d": 1}}, {"q": ["d", "d"]}, "listed twice"),
        ({"q": {"d": 1}}, {"q": ["d"], "r": {"d": 1.0}}, "every question a list"),
    ],
)
def test_bad_dict_inputs_are_data_errors(qrels, run, says):
    with pytest.raises(DataError, match=says):
        score(qrels, run, ["mrr"])


def test_judged_at_k_and_bpref_by_hand():
    qrels = {"q": {"a": 1, "b": 0, "c": 2}}
    run = {"q": {"a": 0.9, "x": 0.8, "b": 0.7, "y": 0.6, "c": 0.5}}
    s = score(qrels, run, ["judged@1", "judged@3", "judged@5", "judged@10", "bpref"]).mean()
    assert (s["judged@1"], s["judged@3"], s["judged@5"], s["judged@10"]) == (1, 2 / 3, 3 / 5, 3 / 10)
    assert s["bpref"] == 0.5  # a: nothing non-relevant above (1); c: b above it, N = 1 (0); / R = 2


@pytest.mark.parametrize("threshold", [1, 2])
def test_bpref_matches_trec_eval_on_incomplete_judgments(threshold, tmp_path):
    """Most retrieved documents are unjudged; judged ones are graded 0, 1 or 2; scores tie often."""
    rng = random.Random(threshold)
    qrels, run = {}, {}
    for q in range(300):
        pool = [f"d{i}" for i in range(40)]
        qrels[f"q{q}"] = {d: rng.choice([0, 0, 0, 1, 2]) for d in rng.sample(pool, rng.randint(1, 25))}
        run[f"q{q}"] = {d: float(rng.randint(0, 6)) for d in rng.sample(pool, rng.randint(1, 30))}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}, relevance_level=threshold).evaluate(run)
    (tmp_path / "q").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    (tmp_path / "r").write_text(
        "".join(f"{q} Q0 {d} 0 {s!r} t\n" for q, docs in run.items() for d, s in docs.items())
    )
    for ours in (
        score(qrels, run, ["bpref"], threshold),
        score(tmp_path / "q", tmp_path / "r", ["bpref"], threshold),
    ):
        values = ours.per_question()
        assert len(values) > 200
        for qid, v in values.items():
            assert v["bpref"] == pytest.approx(ref[qid]["bpref"], abs=1e-9), qid
