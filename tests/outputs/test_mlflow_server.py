"""A real `mlflow server` (PostgreSQL backend, served artifacts), two sweep workers over HTTP, and its UI
in headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import optuna
import pytest

from browser import Browser
from conftest import ROOT, create_database, free_port, start_mlflow_server, stop_server, write_fixture_config

pytestmark = pytest.mark.slow  # processes, servers and kills: minutes; `-m 'not slow'` leaves them out

DOCS_SCREENSHOT = ROOT / "docs" / "mlflow-trials.png"


@pytest.fixture(scope="module")
def served_sweep(tmp_path_factory):
    """Start the server, run a 6-trial sweep with 2 workers against it; yield (uri, workdir)."""
    tmp = tmp_path_factory.mktemp("served")
    backend, drop = create_database("_server")
    port = free_port()
    server = start_mlflow_server(backend, tmp / "artifacts", port, tmp / "server.log")
    uri = f"http://127.0.0.1:{port}"
    try:
        config = write_fixture_config(tmp)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "sweep",
                str(config),
                "--workers",
                "2",
                "--trials",
                "6",
                "--tracking-uri",
                uri,
            ],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        yield uri, tmp, proc.stdout
    finally:
        stop_server(server)
        drop()


def test_two_workers_log_one_parent_and_a_child_per_trial_over_http(served_sweep):
    uri, tmp, out = served_sweep
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("sweep")
    assert exp.artifact_location.startswith("mlflow-artifacts:")  # served by the server, not a local path
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 6
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{tmp / 'runs/sweep/optuna.db'}")
    complete = [t.number for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(int(c.data.tags["sweep.trial"]) for c in children) == complete
    assert all(
        c.info.status == "FINISHED" and c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        for c in children
    )
    assert len({c.data.tags["sweep.worker"] for c in children}) == 2  # both workers logged
    parent = parents[0]
    assert "heldout_ndcg_at_5" in parent.data.metrics and "best_objective" in parent.data.metrics
    fresh = next(c for c in children if "sweep.duplicate_of" not in c.data.tags)
    local = mlflow.artifacts.download_artifacts(
        run_id=fresh.info.run_id, artifact_path="scores.json", tracking_uri=uri, dst_path=str(tmp / "dl")
    )
    assert json.loads(Path(local).read_text())["mean"]["ndcg@5"] == pytest.approx(
        fresh.data.metrics["ndcg_at_5"]
    )
    report = mlflow.artifacts.download_artifacts(
        run_id=parent.info.run_id, artifact_path="report.html", tracking_uri=uri, dst_path=str(tmp / "dl")
    )
    assert 'id="headline"' in Path(report).read_text()
    assert f"{uri}/#/experiments/{exp.experiment_id}/runs" in out  # the sweep prints where to compare trials


def test_the_ui_shows_the_trials_and_their_objective(served_sweep, tmp_path):
    uri, workdir, out = served_sweep
    exp = mlflow.MlflowClient(uri).get_experiment_by_name("sweep")
    printed = next(
        line.split("compare the trials in MLflow:")[1].strip()
        for line in out.splitlines()
        if "compare the trials in MLflow:" in line
    )
    assert "viewStateShareKey=" in printed and printed.startswith(
        f"{uri}/#/experiments/{exp.experiment_id}/runs"
    )
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{workdir / 'runs/sweep/optuna.db'}")
    complete = sorted(
        (t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE),
        key=lambda t: (-t.value, t.number),
    )

    browser = Browser(tmp_path / "profile")
    try:
        browser.goto(printed)  # what the sweep prints, in a fresh browser: no column chosen by hand
        last = f"trial {max(t.number for t in complete):03d}"
        assert browser.wait_for(f"document.body && document.body.innerText.includes('{last}')"), (
            "runs table not shown"
        )
        text = browser.js("document.body.innerText")
        for t in complete:
            assert (
                f"trial {t.number:03d}" in text
            )  # every child run, named by trial number and key parameters
        headers = "[...document.querySelectorAll('[role=columnheader]')].map(e => e.innerText).join('|')"
        assert browser.wait_for(f"{headers}.includes('objective')", 30), browser.js(headers)
        shown = browser.js(headers)
        for name in ("retrieval.fusion.method", "retrieval.fusion.alpha", "retrieval.top_k"):
            assert name in shown, shown  # the searched parameters are columns too
        assert "Sort: objective" in text.replace("\u00a0", " ")
        rows = browser.js("[...document.querySelectorAll('[role=row]')].map(r => r.innerText).join('\\n')")
        first = next(line for line in rows.split("\n") if "trial " in line)
        top = int(first.split("trial ")[1][:3])
        assert study.trials[top].value == max(t.value for t in complete), rows[:500]  # best objective first
        time.sleep(1)
        shot = tmp_path / "ui.png"
        browser.screenshot(shot)
        assert shot.stat().st_size > 20_000
    finally:
        browser.close()
    if os.environ.get("RAG_SWEEP_UPDATE_DOCS"):
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copy(shot, DOCS_SCREENSHOT)
