"""Judging agreement: Cohen's kappa by hand, two blind judges on one session, LLM drafts against a person."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from conftest import start_chat_server
from sweep.cli import main
from sweep.data.model import Document, Question
from sweep.labeling.agreement import cohen_kappa, session_agreement
from sweep.labeling.drafts import DraftClient
from sweep.labeling.session import open_session, session_summary
from sweep.labeling.store import JudgmentStore


def test_kappa_of_a_two_grade_table_worked_by_hand():
    # table (rows: first judge, columns: second): [[4, 1], [2, 3]]
    # observed 7/10 = 0.7; marginals first (0.5, 0.5), second (0.6, 0.4): chance 0.3 + 0.2 = 0.5
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    first = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    second = [0, 0, 0, 0, 1, 0, 0, 1, 1, 1]
    kappa, table = cohen_kappa(first, second, (0, 1))
    assert table.tolist() == [[4, 1], [2, 3]]
    assert kappa == pytest.approx(0.4, abs=1e-15)


def test_kappa_on_three_grades_equals_scikit_learn_and_the_edge_cases_are_nan():
    rng = np.random.default_rng(3)
    first = rng.integers(0, 3, 60).tolist()
    second = [g if rng.random() < 0.6 else int(rng.integers(0, 3)) for g in first]
    kappa, table = cohen_kappa(first, second, (0, 1, 2))
    assert kappa == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)
    assert table.sum() == 60
    assert np.isnan(cohen_kappa([], [], (0, 1))[0])
    assert np.isnan(cohen_kappa([1, 1], [1, 1], (0, 1))[0])  # one grade each: chance explains it all


DOCS = [Document("a", "Alpha text about installing. " * 4), Document("b", "Beta text about shells. " * 4)]


def test_two_judges_judge_one_session_blind_and_their_kappa_is_reported(tmp_path):
    questions = [Question("q1", "How to install?", ()), Question("q2", "Which shell?", ())]
    ann = JudgmentStore(tmp_path / "s", DOCS, questions, judge="ann")
    for q, doc, start, grade in [("q1", "a", 0, 2), ("q1", "b", 0, 0), ("q2", "b", 0, 2), ("q2", "a", 0, 1)]:
        ann.judge(q, doc, start, start + 10, grade)
    bob = JudgmentStore(tmp_path / "s", DOCS, questions, judge="bob")
    assert bob.judgments_of("q1", "bob") == []  # bob does not see ann's grades
    for q, doc, start, grade in [("q1", "a", 0, 2), ("q1", "b", 0, 1), ("q2", "b", 0, 2), ("q2", "a", 20, 0)]:
        bob.judge(q, doc, start, start + 10, grade)
    (agreement,) = session_agreement(bob.state, (0, 1, 2))
    # shared passages: (q1 a 0-10) 2/2, (q1 b 0-10) 0/1, (q2 b 0-10) 2/2; q2's a passages differ
    assert (agreement.first, agreement.second, agreement.n) == ("ann", "bob", 3)
    assert agreement.confusion.tolist() == [[0, 1, 0], [0, 0, 0], [0, 0, 2]]
    # observed 2/3; ann (1/3, 0, 2/3), bob (0, 1/3, 2/3): chance 4/9; kappa (2/3 - 4/9) / (5/9) = 0.4
    assert agreement.kappa == pytest.approx(0.4, abs=1e-12)
    assert "ann vs bob: Cohen's kappa 0.400 (fair), 67% identical, 3 passage(s)" in session_summary(bob)
    lines = [json.loads(x) for x in (tmp_path / "s" / "questions.jsonl").read_text().splitlines()]
    assert sum(len(q["evidence"]) for q in lines) == 8  # the eval set keeps every judge's grades


def grade_reply(body: dict):
    """The 'LLM' grades 2 what mentions Python, else 0."""
    return json.dumps({"grade": 2 if "python" in body["messages"][-1]["content"].lower() else 0})


def test_llm_draft_grades_stay_out_of_the_eval_set_and_are_compared_with_the_person(
    fixture_config, tmp_path, capsys
):
    url, seen, stop = start_chat_server(grade_reply)
    try:
        session = open_session(
            fixture_config,
            tmp_path / "session",
            depth=2,
            modes=("bm25",),
            drafter=DraftClient(url, "judge-model"),
            draft_grades=True,
        )
    finally:
        stop()
    store = session.store
    drafted = dict(store.state.draft_grades)
    pooled = [(qid, p) for qid in store.state.questions for p in session.pools[qid]]
    assert len(drafted) == len(pooled) == len(seen) and drafted
    before = (tmp_path / "session" / "questions.jsonl").read_text()
    person = {}
    for qid, p in pooled:  # the person: the first passage of each question relevant, the rest not
        person[(qid, p.doc_id, p.start, p.end)] = 2 if p is session.pools[qid][0] else 0
        store.judge(qid, p.doc_id, p.start, p.end, person[(qid, p.doc_id, p.start, p.end)])
    assert before.count('"grade"') == len(store.state.questions)  # the set's own evidence, none of the LLM's
    keys = list(person)
    expected = cohen_kappa_score([drafted[k] for k in keys], [person[k] for k in keys])
    (agreement,) = session_agreement(store.state, store.grades)
    assert (agreement.first, agreement.second) == ("llm draft", "you")
    assert agreement.kappa == pytest.approx(expected, abs=1e-12)
    assert main(["label", str(fixture_config), "--out", str(tmp_path / "session"), "--stats"]) == 0
    out = capsys.readouterr().out
    assert f"llm draft vs you: Cohen's kappa {expected:.3f}" in out
    assert f"llm draft: {len(drafted)} drafted grade(s), not in the eval set" in out
