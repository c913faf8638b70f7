"""The MLflow writer process: calls made in order with everything a trial logs, failures reported (never
raised), the child gone with its parent, and a sweep whose writer dies still ending with MLflow = Optuna."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import numpy as np
import pytest

from conftest import ROOT
from sweep.config.load import load_config
from sweep.metrics import Scores
from sweep.outputs import writer as writer_module
from sweep.outputs.tracking import Tracker
from sweep.outputs.trial_log import TrialLog, artifacts
from sweep.outputs.writer import TrackingWriter


def store(tmp_path: Path) -> tuple[str, Tracker, str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "study")
    return uri, tracker, tracker.parent("study", {})


def trial_log(number: int) -> TrialLog:
    config = load_config(ROOT / "configs" / "hybrid.yaml").model_dump(mode="json", exclude={"source"})
    scores = Scores(["q1", "q2"], {"ndcg@10": np.array([1.0, 0.25])})
    ranking = {"q1": [("d1", 0.5), ("d2", 0.25)], "q2": [("d2", 0.75)]}
    curve = np.array([0.5, 1.0])
    return TrialLog(
        number,
        0.625,
        {"ndcg@10": 0.625, "latency_ms": 3.0},
        config,
        doc_means={"ndcg@10": 0.5},
        timings={"bm25": 0.01},
        counters={"bm25_memory_hits": 1},
        recall_curve=curve,
        files=artifacts(number, config, scores, ranking, curve),
    )


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    """The process exited (gone, or a zombie nobody reaps in a container)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_calls_are_made_in_order_with_everything_the_trial_logs(tmp_path):
    uri, tracker, parent = store(tmp_path)
    writer = TrackingWriter(uri, "study", 5.0)
    for number in (0, 1):
        assert writer.call("start_trial", parent, number, {"retrieval.bm25.k1": 0.9}, "ndcg@10", {}) == []
        writer.call("log_trial", trial_log(number))
        writer.call("close_trial", number, "complete")
    assert writer.flush() == [] and writer.pending == 0
    assert writer.close() == [] and wait_gone(writer.pid)

    runs = sorted(tracker.children(parent), key=lambda r: int(r.data.tags["sweep.trial"]))
    assert [r.data.tags["sweep.trial"] for r in runs] == ["0", "1"]
    run = runs[1]
    assert run.info.status == "FINISHED" and run.data.tags["sweep.state"] == "complete"
    assert run.data.metrics["objective"] == 0.625 and run.data.metrics["doc_ndcg_at_10"] == 0.5
    assert (
        run.data.params["retrieval.bm25.k1"] == "0.9" and run.data.tags["sweep.cache.bm25_memory_hits"] == "1"
    )
    curve = tracker.client.get_metric_history(run.info.run_id, "recall_curve")
    assert sorted((m.step, m.value) for m in curve) == [(1, 0.5), (2, 1.0)]
    folder = Path(mlflow.artifacts.download_artifacts(run_id=run.info.run_id, tracking_uri=uri))
    assert json.loads((folder / "scores.json").read_text())["per_question"] == {
        "q1": {"ndcg@10": 1.0},
        "q2": {"ndcg@10": 0.25},
    }
    assert (folder / "run.trec").read_text().splitlines() == [
        "q1 Q0 d1 1 0.5 trial-1",
        "q1 Q0 d2 2 0.25 trial-1",
        "q2 Q0 d2 1 0.75 trial-1",
    ]


def test_failures_come_back_as_reports_and_the_writer_goes_on(tmp_path):
    uri, tracker, parent = store(tmp_path)
    writer = TrackingWriter(uri, "study", 0.3)
    writer.call("no_such_method", 1)  # a bug of ours: said, not raised
    writer.call("client.set_tag", "0" * 32, "a", "b")  # MLflow refuses it for the whole retry window
    writer.call("start_trial", parent, 4, {}, "ndcg@10", {})
    reports = writer.close()
    assert len(reports) == 2
    assert reports[0].startswith("error: no_such_method failed (AttributeError")
    assert reports[1].startswith("unavailable: MLflow does not answer (set_tag")
    assert [r.data.tags["sweep.trial"] for r in tracker.children(parent)] == ["4"]


def test_the_writer_dies_with_its_parent_leaving_its_queue_unwritten(tmp_path):
    uri, tracker, parent_run = store(tmp_path)
    script = (
        "import sys, time\n"
        "from sweep.outputs.writer import TrackingWriter\n"
        f"w = TrackingWriter({uri!r}, 'study', 5.0)\n"
        "w.call('client.probe'); w.flush()\n"  # the child is up and serving
        f"for n in range(20): w.call('start_trial', {parent_run!r}, n, {{}}, 'ndcg@10', {{}})\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert wait_gone(child)
    # a killed sweep's queue is for the next run's reconcile pass to log, not for an orphan racing it
    assert len(tracker.children(parent_run)) < 20


@pytest.mark.slow
def test_a_sweep_whose_writer_dies_still_ends_with_one_run_per_complete_trial(
    fixture_config, tmp_path, monkeypatch, capsys
):
    import optuna

    from sweep.tuning.sweep import run_sweep

    real_call = TrackingWriter.call

    def call(self, method, *args):
        if method == "start_trial" and args[1] == 3:
            os.kill(self.pid, signal.SIGKILL)
            self._proc.wait()
        return real_call(self, method, *args)

    monkeypatch.setattr(writer_module.TrackingWriter, "call", call)
    monkeypatch.chdir(tmp_path)
    result = run_sweep(fixture_config, trials=6)
    assert "the writer process exited" in capsys.readouterr().out
    study = optuna.load_study(study_name="sweep", storage=result.storage)
    complete = sorted(t.number for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE)
    assert len(complete) == 6
    tracker = Tracker(result.tracking_uri, "sweep")
    runs = tracker.children(tracker.find_parent("sweep"))
    assert sorted(int(r.data.tags["sweep.trial"]) for r in runs) == complete  # one run each, none extra
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all("objective" in r.data.metrics for r in runs)  # the lost ones logged late, from the study
