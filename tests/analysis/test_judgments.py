"""judged@k behind the sweep's warning that the best score is only a lower bound."""

from __future__ import annotations

import json

import pytest
import yaml

from sweep.analysis.judgments import judged_warning
from sweep.tuning.sweep import run_sweep


@pytest.mark.parametrize(
    "means,nonrelevant,warns",
    [
        ({"judged@10": 0.41, "judged@20": 0.9}, 12, "41% of the best trial's top 10"),
        ({"judged@10": 0.8}, 12, None),  # enough of it judged
        ({"judged@3": 0.5, "judged@50": 0.1}, 12, "50% of the best trial's top 3"),  # largest k <= 10
        ({"judged@10": 0.1}, 0, None),  # only relevant evidence: not a pooled set, no judged@k to read
        ({"judged@20": 0.1}, 12, None),
    ],
)
def test_the_warning_reads_judged_at_10_of_pooled_sets_only(means, nonrelevant, warns):
    warning = judged_warning(means, nonrelevant, "ndcg@10")
    assert warning is None if warns is None else warns in warning


def test_a_sweep_on_thin_judgments_says_its_best_score_is_a_lower_bound(fixture_config, tmp_path, capsys):
    questions = tmp_path / "data" / "questions.jsonl"
    lines = [json.loads(line) for line in questions.read_text().splitlines()]
    for q in lines:  # one more judgment each: a document judged not relevant
        other = next(d for d in ("ctx", "gen") if d != q["evidence"][0]["doc_id"])
        q["evidence"].append({"doc_id": other, "grade": 0})
    questions.write_text("".join(json.dumps(q) + "\n" for q in lines))
    config = yaml.safe_load(fixture_config.read_text())
    assert set(config["evaluation"]["ks"]) == {1, 3, 5}  # judged@5 is read: at most 2 of 5 judged
    run_sweep(fixture_config, trials=2, runs_dir=tmp_path / "runs")
    out = capsys.readouterr().out
    assert "is judged: its ndcg@5 is a lower bound" in out
