"""Tuning on one part of the questions, the final word on the other, and the study's report."""

from __future__ import annotations

import json

import mlflow
import optuna
import pytest
import yaml

from browser import Browser
from sweep.cli import main
from sweep.config.load import load_config
from sweep.config.schema import DatasetConfig, HoldoutPart
from sweep.data import Question
from sweep.data.select import load_dataset, partition
from sweep.pipeline.runner import Pipeline
from sweep.tuning.holdout import own_splits, plan_holdout
from sweep.tuning.search import HoldoutSettings
from sweep.tuning.sweep import run_sweep


def questions(n: int) -> list[Question]:
    return [Question(f"q{i}", f"text {i}", ()) for i in range(n)]


def test_partition_is_seeded_disjoint_and_ignores_order():
    qs = questions(100)
    tune = partition(qs, HoldoutPart(part="tune", fraction=0.3, seed=1))
    held = partition(qs, HoldoutPart(part="heldout", fraction=0.3, seed=1))
    assert len(held) == 30 and len(tune) == 70
    assert {q.id for q in tune} | {q.id for q in held} == {q.id for q in qs}
    assert not {q.id for q in tune} & {q.id for q in held}
    shuffled = list(reversed(qs))
    assert {q.id for q in partition(shuffled, HoldoutPart(part="heldout", fraction=0.3, seed=1))} == {
        q.id for q in held
    }
    other = partition(qs, HoldoutPart(part="heldout", fraction=0.3, seed=2))
    assert {q.id for q in other} != {q.id for q in held}


def test_a_datasets_own_splits_are_used(tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    for split in ("train", "test"):
        (beir / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n")
    never = lambda: pytest.fail("BEIR splits are read from the folder, not by loading")  # noqa: E731
    assert own_splits(DatasetConfig(loader="beir", path=str(beir), split="test"), never) == ("train", "test")
    assert own_splits(DatasetConfig(loader="beir", path=str(beir), split="train"), never) is None
    bundled = DatasetConfig(loader="python_reference", path="bundled")
    plan = plan_holdout(HoldoutSettings(), bundled, lambda: load_dataset(bundled))
    assert plan.tune == {"split": "tune"} and plan.heldout == {"split": "heldout"}
    tune = load_dataset(bundled.model_copy(update=plan.tune))
    held = load_dataset(bundled.model_copy(update=plan.heldout))
    assert len(tune.questions) > 0 and len(held.questions) > 0
    assert not {q.id for q in tune.questions} & {q.id for q in held.questions}
    assert (
        plan_holdout(HoldoutSettings(fraction=0), DatasetConfig(path="x"), lambda: tune.with_questions([]))
        is None
    )


@pytest.fixture()
def finished_sweep(fixture_config, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    result = run_sweep(fixture_config, trials=8)
    return result, capsys.readouterr().out


def test_the_sweep_ends_with_held_out_numbers_on_the_parent_run(finished_sweep, fixture_config, tmp_path):
    result, out = finished_sweep
    v = result.verdict
    assert v is not None and v.n_questions == 2  # round(0.3 * 8) of the fixture's questions
    assert "held-out" in out and "95% CI" in out and "report:" in out

    # the held-out number is the best configuration evaluated on exactly the held-out questions
    best_yaml = tmp_path / "best.yaml"
    best_yaml.write_text(result.best_config_yaml)
    held = load_config(best_yaml, ["dataset.holdout.part=heldout"])
    again = Pipeline(held.cache_dir).run(held)
    assert v.best["ndcg@5"] == pytest.approx(again.scores.mean()["ndcg@5"])
    assert v.comparison.n_questions == 2

    client = mlflow.MlflowClient(result.tracking_uri)
    exp = client.get_experiment_by_name("sweep")
    found = client.search_runs([exp.experiment_id], max_results=100)
    parent = next(r for r in found if "mlflow.parentRunId" not in r.data.tags)
    metrics = parent.data.metrics
    assert metrics["heldout_ndcg_at_5"] == pytest.approx(v.best["ndcg@5"])
    assert (
        metrics["heldout_ndcg_at_5_ci_low"]
        <= metrics["heldout_ndcg_at_5"]
        <= metrics["heldout_ndcg_at_5_ci_high"]
    )
    assert "heldout_baseline_ndcg_at_5" in metrics and "heldout_p_ndcg_at_5" in metrics
    assert {"report.html", "diagnosis.txt", "best_config.yaml"} <= {
        a.path for a in client.list_artifacts(parent.info.run_id)
    }

    # no trial saw a held-out question
    child = next(
        r for r in found if "mlflow.parentRunId" in r.data.tags and "sweep.duplicate_of" not in r.data.tags
    )
    local = mlflow.artifacts.download_artifacts(
        run_id=child.info.run_id, artifact_path="scores.json", tracking_uri=result.tracking_uri
    )
    seen = set(json.loads(open(local).read())["per_question"])
    assert len(seen) == 6 and not seen & {
        q.question_id for q in v.comparison.improved + v.comparison.regressed
    }
    held_ids = {q.id for q in load_dataset(held.dataset).questions}
    assert len(held_ids) == 2 and not seen & held_ids
    assert parent.data.metrics["heldout_questions"] == 2
    assert (
        optuna.load_study(study_name="sweep", storage=result.storage).user_attrs["verdict"]["n_questions"]
        == 2
    )


def test_compare_two_trials_by_mlflow_run_id(finished_sweep, capsys):
    result, _ = finished_sweep
    client = mlflow.MlflowClient(result.tracking_uri)
    exp = client.get_experiment_by_name("sweep")
    children = sorted(
        (
            r
            for r in client.search_runs([exp.experiment_id])
            if "mlflow.parentRunId" in r.data.tags and "sweep.duplicate_of" not in r.data.tags
        ),
        key=lambda r: int(r.data.tags["sweep.trial"]),
    )
    a, b = children[0].info.run_id, children[1].info.run_id
    assert main(["compare", a, b, "--tracking-uri", result.tracking_uri, "--json", "cmp.json"]) == 0
    out = json.loads(open("cmp.json").read())
    assert out["n_questions"] == 6 and "ndcg@5" in out["metrics"]
    assert "trial 000" in capsys.readouterr().out
    assert main(["compare", "0" * 32, b, "--tracking-uri", result.tracking_uri]) == 2
    assert "cannot read its scores.json" in capsys.readouterr().err


def test_the_report_opens_in_headless_chromium(finished_sweep, tmp_path, capsys):
    result, _ = finished_sweep
    assert main(["report", "sweep", "--out", "again.html"]) == 0  # rebuilt from the storage alone
    assert "wrote again.html" in capsys.readouterr().out
    for page in (result.report_path, tmp_path / "again.html"):
        browser = Browser(tmp_path / f"profile-{page.stem}", size="1200,2400")
        try:
            browser.goto(page.resolve().as_uri())
            assert browser.wait_for("!!document.querySelector('#trials')", 30)
            for element in (
                "headline",
                "best-config",
                "history",
                "importance",
                "recall-curves",
                "diagnostics",
                "flipped",
                "trials",
            ):
                assert browser.js(f"!!document.getElementById('{element}')"), element
            # the inlined plots decode and render: natural size is known only for a loaded image
            assert browser.js("[...document.images].filter(i => i.naturalWidth > 100).length") >= 3
            text = browser.js("document.body.innerText")
            assert "Study sweep" in text and "95% CI" in text and "Held-out result" in text
            browser.screenshot(tmp_path / f"{page.stem}.png")
            assert (tmp_path / f"{page.stem}.png").stat().st_size > 20_000
        finally:
            browser.close()
    assert main(["report", "no-such-study"]) == 2
    assert "no study 'no-such-study'" in capsys.readouterr().err


def test_holdout_can_be_turned_off(fixture_config, tmp_path):
    data = yaml.safe_load(fixture_config.read_text())
    data["search"]["holdout"] = {"fraction": 0}
    fixture_config.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run_sweep(fixture_config, runs_dir=tmp_path / "runs", trials=2, quiet=True)
    assert result.verdict is None
    html = result.report_path.read_text()
    assert "No held-out evaluation" in html
