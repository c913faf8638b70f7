"""``sweep gate``: the non-inferiority decision, its exit codes, its outputs and its three kinds of side."""

from __future__ import annotations

import itertools
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml
from markdown_it import MarkdownIt

from conftest import write_scifact_slice
from sweep.analysis.significance import non_inferiority
from sweep.cli import main
from sweep.pipeline.evaluate import evaluate_config
from sweep.serving.gate import gate

N = 100


def write_planted(tmp_path: Path, regressed: int = 5) -> tuple[Path, Path, Path]:
    """Qrels with one relevant document per question, a baseline run that ranks it first everywhere,
    and a candidate that pushes it to rank 50 on ``regressed`` questions: NDCG@10 falls by exactly
    ``regressed / N`` (1 -> 0 on each), recall@100 not at all."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{i} 0 rel{i} 1\n" for i in range(N)))

    def run(path: Path, moved: set[int]) -> Path:
        lines = []
        for i in range(N):
            docs = [f"other{i}-{j}" for j in range(59)]
            docs.insert(49 if i in moved else 0, f"rel{i}")
            lines += [f"q{i} Q0 {d} {r} {100 - r} tag\n" for r, d in enumerate(docs, 1)]
        path.write_text("".join(lines))
        return path

    return qrels, run(tmp_path / "base.trec", set()), run(tmp_path / "cand.trec", set(range(regressed)))


def test_a_planted_drop_of_005_ndcg10_fails_and_the_margin_and_metric_are_honoured(tmp_path, capsys):
    qrels, base, cand = write_planted(tmp_path)
    result = gate(base, cand, eval_set=qrels, metrics=["ndcg@10", "recall@100"], max_drop=0.01)
    ndcg, recall = result.checks
    assert ndcg.baseline == 1.0 and ndcg.candidate == pytest.approx(0.95, abs=1e-15)
    assert ndcg.delta == pytest.approx(-0.05, abs=1e-15) and not ndcg.passed
    assert recall.delta == 0.0 and recall.passed and not result.passed
    args = ["gate", str(base), str(cand), "--eval-set", str(qrels)]
    assert main(args) == 1  # default metric ndcg@10, margin 0.01
    assert main(args + ["--metric", "recall@100"]) == 0
    assert main(args + ["--max-drop", "0.1"]) == 0  # a drop of 0.05 is inside a margin of 0.10
    assert main(args + ["--max-drop", "0.04"]) == 1
    assert main([*args[:2], str(base), "--eval-set", str(qrels)]) == 0  # identical candidate
    out = capsys.readouterr().out
    assert "FAIL  ndcg@10 >= baseline - 0.01: 1.0000 -> 0.9500 (-0.0500" in out


def test_the_one_sided_p_values_match_an_exact_enumeration_and_scipy():
    rng = np.random.default_rng(7)
    a = rng.uniform(0, 1, 12)
    b = a + rng.normal(-0.005, 0.05, 12)
    margin = 0.02
    d = b - a + margin
    flips = np.array(list(itertools.product([-1, 1], repeat=len(d))))
    exact = np.mean((flips * d).mean(axis=1) >= d.mean() - 1e-12)  # every one of the 4096 assignments
    p_rand, p_t = non_inferiority(a, b, margin, n_resamples=40_000, seed=1)
    assert p_rand == pytest.approx(exact, abs=0.01)
    from scipy import stats

    assert p_t == pytest.approx(stats.ttest_1samp(d, 0, alternative="greater").pvalue, rel=1e-12)


def test_markdown_and_junit_outputs_parse_and_say_what_failed(tmp_path):
    qrels, base, cand = write_planted(tmp_path)
    md, xml, js = tmp_path / "summary.md", tmp_path / "gate.xml", tmp_path / "gate.json"
    code = main(
        [
            "gate",
            str(base),
            str(cand),
            "--eval-set",
            str(qrels),
            "--metric",
            "ndcg@10",
            "--metric",
            "recall@100",
        ]
        + ["--summary", str(md), "--junit", str(xml), "--json", str(js)]
    )
    assert code == 1
    tokens = MarkdownIt("commonmark").enable("table").parse(md.read_text())
    assert sum(t.type == "table_open" for t in tokens) == 3  # gates, every metric, regressed questions
    cells, row = [], None
    for t in tokens:  # each table row's cell texts, in order
        if t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t.content)
        elif t.type == "tr_close":
            cells.append(row)
            row = None
    assert cells[1][0] == "ndcg@10 >= baseline - 0.01" and cells[1][-1] == "FAIL"
    assert cells[2][0] == "recall@100 >= baseline - 0.01" and cells[2][-1] == "pass"
    regressed = [r[0] for r in cells if r and r[0][1:].isdigit()]
    assert sorted(regressed) == [f"q{i}" for i in range(5)]
    root = ET.parse(xml).getroot()
    assert root.get("tests") == "2" and root.get("failures") == "1"
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == ["ndcg@10 >= baseline - 0.01", "recall@100 >= baseline - 0.01"]
    assert cases[0].find("failure") is not None and cases[1].find("failure") is None
    assert json.loads(js.read_text())["passed"] is False


@pytest.fixture()
def scifact_bm25(shared_data, tmp_path) -> Path:
    data = write_scifact_slice(shared_data, tmp_path / "slice", n_train=20, n_test=20, n_other=60)
    config = {
        "dataset": {"loader": "native", "path": str(data)},
        "chunking": {"strategy": "document"},
        "retrieval": {"mode": "bm25", "top_k": 20},
        "evaluation": {"ks": [1, 5, 10, 20]},
        "cache_dir": str(tmp_path / "cache"),
    }
    path = tmp_path / "bm25.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_export_folder_config_and_run_file_are_all_accepted_and_scored_alike(scifact_bm25, tmp_path):
    exported = tmp_path / "prod"
    exported.mkdir()
    shutil.copy(scifact_bm25, exported / "best_config.yaml")
    run = tmp_path / "bm25.trec"
    assert main(["eval", str(scifact_bm25), "--run", str(run)]) == 0
    direct = evaluate_config(scifact_bm25).scores.mean()["ndcg@10"]
    for baseline, candidate in ((exported, scifact_bm25), (run, scifact_bm25), (exported, run)):
        result = gate(baseline, candidate, eval_set=scifact_bm25)
        (check,) = result.checks
        assert check.baseline == pytest.approx(direct, abs=1e-12) and check.delta == 0.0
        assert result.passed, (baseline, candidate)
    weak = tmp_path / "weak.yaml"
    weak.write_text(scifact_bm25.read_text().replace("top_k: 20", "top_k: 1"))
    assert main(["gate", str(exported), str(weak), "--metric", "ndcg@10"]) == 1  # candidate's eval set


def test_bad_gate_inputs_are_one_line_and_exit_2(scifact_bm25, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    qrels, run, _ = write_planted(tmp_path)
    cases = [
        (["gate", str(tmp_path / "nope.yaml"), str(scifact_bm25)], "no such file or folder"),
        (["gate", str(empty), str(scifact_bm25)], "a folder without best_config.yaml"),
        (
            ["gate", str(scifact_bm25), str(scifact_bm25), "--metric", "ndcg"],
            "--metric: metric 'ndcg' needs a cutoff",
        ),
        (["gate", str(scifact_bm25), str(run), "--eval-set", str(qrels)], "a config needs an eval set"),
        (["gate", str(scifact_bm25), str(scifact_bm25), "--alpha", "0.7"], "--alpha must be between"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, err


def test_gating_on_a_sweeps_tuning_questions_is_warned_about(scifact_bm25, tmp_path):
    exported = tmp_path / "tuned"
    exported.mkdir()
    config = yaml.safe_load(scifact_bm25.read_text())
    config["dataset"]["split"] = "train"  # what best_config.yaml holds after a sweep on SciFact's splits
    (exported / "best_config.yaml").write_text(yaml.safe_dump(config))
    tuned = gate(exported, exported)
    assert tuned.passed and tuned.comparison.n_questions == 20
    assert any("the eval set is a sweep's tuning questions" in w for w in tuned.warnings)
    assert not any("tuning questions" in w for w in gate(exported, exported, eval_set=scifact_bm25).warnings)
