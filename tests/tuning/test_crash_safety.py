"""Overnight sweeps that cannot go wrong: distinct trials across workers, MLflow in step with Optuna after
any kill, a tracking-server outage survived, failures of an earlier run not held against a corrected one."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import mlflow
import optuna
import pytest
import yaml
from test_workers import assert_consistent, children_of, slow_trials, sweep_command

from conftest import ROOT, create_database, free_port, start_mlflow_server, stop_server
from sweep.errors import SweepError
from sweep.tuning.sweep import run_sweep

pytestmark = pytest.mark.slow  # processes, servers and kills: minutes; `-m 'not slow'` leaves them out

TrialState = optuna.trial.TrialState


def wide_bm25_space(config: Path) -> Path:
    """303 configurations (chunk size × k1), every trial a new chunking: BM25 only, no model to load."""
    data = yaml.safe_load(config.read_text())
    data["chunking"] = {"strategy": "fixed", "unit": "chars", "size": 40, "overlap": 0}
    data["retrieval"] = {"mode": "bm25", "candidates": 8, "top_k": 5, "bm25": {"stemming": "none", "k1": 0.9}}
    data["search"]["space"] = {
        "chunking.size": {"int": [20, 120]},
        "retrieval.bm25.k1": {"categorical": [0.9, 1.2, 1.5]},
    }
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    return config


def test_four_workers_on_postgresql_run_sixteen_distinct_trials_and_the_baseline_once(
    fixture_config, tmp_path, postgres_url
):
    wide_bm25_space(fixture_config)
    command = sweep_command(fixture_config, "--trials", "16", "--storage", postgres_url)
    procs = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(4)
    ]  # four machines, started together
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-2000:] for o in outs)
    study = optuna.load_study(study_name="sweep", storage=postgres_url)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 16
    assert len({tuple(sorted(t.params.items())) for t in complete}) == 16  # sixteen distinct configurations
    assert len([t for t in study.trials if t.user_attrs.get("baseline")]) == 1  # enqueued exactly once
    baseline = {"chunking.size": 40, "retrieval.bm25.k1": 0.9}
    assert len([t for t in complete if t.params == baseline]) == 1
    assert {t.user_attrs.get("fail_kind") for t in study.trials if t.state != TrialState.COMPLETE} <= {
        "duplicate",
        "surplus",
    }
    assert len({t.user_attrs["worker"]["pid"] for t in complete}) >= 2  # they shared the work


def test_sigkill_at_random_moments_then_resume_leaves_one_finished_run_per_complete_trial(
    fixture_config, tmp_path
):
    slow_trials(fixture_config)  # dense: each trial encodes a new chunking, so kills land in encoding too
    storage = f"sqlite:///{tmp_path / 'runs/sweep/optuna.db'}"
    tracking = f"sqlite:///{tmp_path / 'runs/mlflow.db'}"
    rng = random.Random(14)
    kills = 0
    for _ in range(30):  # start-up, encoding, a trial, its logging, the end: wherever the moment falls
        proc = subprocess.Popen(
            sweep_command(fixture_config, "--trials", "24"),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(2.0, 7.0))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        if kills == 10:
            break
    assert kills == 10
    # a resume that hangs dumps every thread's stack (faulthandler on SIGABRT): the failure says where it waits
    final = subprocess.Popen(
        sweep_command(fixture_config, "--trials", "24"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    try:
        out, err = final.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        final.send_signal(signal.SIGABRT)
        out, err = final.communicate()
        pytest.fail("the resumed sweep hung; its threads:\n" + err[-8000:] + "\nits output:\n" + out[-2000:])
    assert final.returncode == 0, out[-3000:] + err[-3000:]
    assert_consistent(
        storage, tracking, 24
    )  # finished runs == COMPLETE trials == 24, nothing RUNNING, one each
    study = optuna.load_study(study_name="sweep", storage=storage)
    assert len({t.params["chunking.size"] for t in study.trials if t.state == TrialState.COMPLETE}) == 24


def test_a_trial_killed_before_its_worker_stamped_it_is_failed_after_the_grace_period(
    fixture_config, tmp_path
):
    """Killed between Optuna creating the trial and its first heartbeat: no pid, no heartbeat. The resume
    used to count it as another worker's and wait for it forever (seen once in CI after ten SIGKILLs)."""
    wide_bm25_space(fixture_config)
    data = yaml.safe_load(fixture_config.read_text())
    data["search"].update({"heartbeat_interval": 1, "grace_period": 2})
    fixture_config.write_text(yaml.safe_dump(data, sort_keys=False))
    storage = f"sqlite:///{tmp_path / 'runs/sweep/optuna.db'}"
    first = subprocess.run(
        sweep_command(fixture_config, "--trials", "3"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    orphan = optuna.load_study(
        study_name="sweep", storage=storage
    ).ask()  # RUNNING, never stamped, no heartbeat
    resumed = subprocess.run(
        sweep_command(fixture_config, "--trials", "4"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert f"trial(s) {orphan.number} of dead workers marked failed" in resumed.stdout
    study = optuna.load_study(study_name="sweep", storage=storage)
    assert study.trials[orphan.number].state == TrialState.FAIL
    assert study.trials[orphan.number].user_attrs["fail_kind"] == "worker_died"
    assert_consistent(storage, f"sqlite:///{tmp_path / 'runs/mlflow.db'}", 4)


def test_a_tracking_server_outage_is_survived_and_the_missing_runs_logged_later(fixture_config, tmp_path):
    slow_trials(fixture_config)
    data = yaml.safe_load(fixture_config.read_text())
    data["search"]["tracking_retry_seconds"] = 3
    fixture_config.write_text(yaml.safe_dump(data, sort_keys=False))
    backend, drop = create_database("_outage")
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_mlflow_server(backend, tmp_path / "artifacts", port, tmp_path / "server.log")
    try:
        proc = subprocess.Popen(
            sweep_command(fixture_config, "--trials", "12", "--tracking-uri", uri),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if sum(" trial " in x and "ndcg@5" in x for x in lines) >= 2:
                break
        stop_server(server)  # down for longer than the retry window: trials go on without it
        out = "".join(lines) + proc.communicate(timeout=600)[0]
        assert proc.returncode == 0, out[-4000:]
        assert (
            "MLflow does not answer" in out and "the missing runs are logged when MLflow answers again" in out
        )
        assert "Traceback" not in out and "stopping:" not in out
        study = optuna.load_study(
            study_name="sweep", storage=f"sqlite:///{tmp_path / 'runs/sweep/optuna.db'}"
        )
        assert (
            len([t for t in study.trials if t.state == TrialState.COMPLETE]) == 12
        )  # no trial failed for it
        assert not [
            t for t in study.trials if t.state == TrialState.FAIL and t.user_attrs.get("fail_kind") == "error"
        ]

        server = start_mlflow_server(backend, tmp_path / "artifacts", port, tmp_path / "server.log")
        again = subprocess.run(
            sweep_command(fixture_config, "--trials", "12", "--tracking-uri", uri),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert "logged to MLflow late" in again.stdout
        assert_consistent(f"sqlite:///{tmp_path / 'runs/sweep/optuna.db'}", uri, 12)
        _, children = children_of(uri)
        assert any(c.data.tags.get("sweep.logged_late") == "true" for c in children)
    finally:
        stop_server(server)
        drop()


def test_an_unreachable_tracking_uri_at_start_is_one_line(fixture_config, tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    proc = subprocess.run(
        sweep_command(fixture_config, "--tracking-uri", uri),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and time.monotonic() - started < 60
    assert (
        proc.stderr.startswith(f"error: --tracking-uri {uri}: does not answer")
        and proc.stderr.count("\n") == 1
    )


def test_failures_of_an_earlier_run_do_not_stop_the_corrected_one(fixture_config, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    over = [
        "retrieval.query.transform=plugin",
        "retrieval.query.plugin=flaky_plugin:rewrite",
        "retrieval.mode=bm25",
    ]
    monkeypatch.setenv("FLAKY_PLUGIN_FAILS", "1")
    with pytest.raises(SweepError, match="has no complete trial"):
        run_sweep(fixture_config, over, runs_dir=tmp_path / "runs", quiet=True, trials=6)
    study = optuna.load_study(study_name="sweep", storage=f"sqlite:///{tmp_path / 'runs/sweep/optuna.db'}")
    failed = [
        t for t in study.trials if t.state == TrialState.FAIL and t.user_attrs.get("fail_kind") == "error"
    ]
    assert (
        len(failed) == 12 and "the rewriting service is down" in failed[0].user_attrs["error"]
    )  # stopped at 2 × 6
    monkeypatch.delenv("FLAKY_PLUGIN_FAILS")
    result = run_sweep(fixture_config, over, runs_dir=tmp_path / "runs", quiet=True, trials=6)
    assert result.n_complete == 6  # the same study, continued: the old failures did not count against it


def test_an_exhausted_space_ends_the_study_with_a_message(fixture_config, tmp_path, capsys):
    result = run_sweep(
        fixture_config,
        ["search.space={retrieval.top_k: {int: [3, 5]}}"],
        runs_dir=tmp_path / "runs",
        trials=10,
    )
    assert result.n_complete == 3
    out = capsys.readouterr().out
    assert "the search space holds 3 configuration(s): the study ends after 3, not 10" in out
    assert "stopping: all 3 configurations of the search space are evaluated" in out


def test_passwords_in_urls_are_never_printed_or_logged(fixture_config, tmp_path, capsys):
    url, drop = create_database("_secret")
    try:
        secret = url.replace("://root@", "://root:s3cret-pw@").replace(
            "://postgres@", "://postgres:s3cret-pw@"
        )
        assert "s3cret-pw" in secret
        result = run_sweep(fixture_config, runs_dir=tmp_path / "runs", trials=3, storage=secret)
        out = capsys.readouterr()
        assert "s3cret-pw" not in out.out + out.err and ":***@127.0.0.1" in out.out
        client = mlflow.MlflowClient(result.tracking_uri)
        runs = client.search_runs([result.experiment_id])
        assert not [r for r in runs if "s3cret" in str(r.data.tags) + str(r.data.params)]
        from sweep.tuning.sweep import Sweep

        workers = Sweep(fixture_config, runs_dir=tmp_path / "runs", storage=secret, workers=2, quiet=True)
        assert "s3cret" not in " ".join(
            workers.worker_argv()
        )  # spawned workers get it in the environment, not argv
    finally:
        drop()


def test_a_finished_sweep_leaves_no_database_connection_open(fixture_config, tmp_path, postgres_url):
    """A notebook runs sweep after sweep: each used to keep its pool's connections until PostgreSQL refused more."""
    import psycopg

    run_sweep(fixture_config, runs_dir=tmp_path / "runs", quiet=True, trials=3, storage=postgres_url)
    database = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url.rsplit("/", 1)[0] + "/test", autocommit=True) as admin:
        open_ = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)
        ).fetchone()[0]
    assert open_ == 0


def test_a_store_whose_creation_is_interrupted_leaves_no_half_made_file(tmp_path):
    """MLflow and Optuna create tables one by one: a SIGKILL in between used to leave a store that every
    later run refused ("table secrets already exists"). The store is now made under a temporary name."""
    import sqlite3

    from sweep.locks import create_whole

    url = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def killed_halfway(tmp_url: str) -> None:
        sqlite3.connect(tmp_url.removeprefix("sqlite:///")).execute(
            "create table secrets (id int)"
        ).connection.commit()
        raise KeyboardInterrupt  # the process dies here

    with pytest.raises(KeyboardInterrupt):
        create_whole(url, killed_halfway)
    assert not (tmp_path / "mlflow.db").exists()
    assert [p.name for p in tmp_path.iterdir() if p.suffix != ".lock"] == []
    create_whole(url, lambda tmp: mlflow.MlflowClient(tmp).search_experiments(max_results=1))
    assert mlflow.MlflowClient(url).get_experiment_by_name("Default") is not None
