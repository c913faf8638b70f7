"""Several workers on one study, dead workers, pruning and shared caches: through Optuna's and MLflow's clients."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import optuna
import pytest
import yaml

from conftest import TOPICS
from sweep.tuning.sweep import run_sweep

pytestmark = pytest.mark.slow  # processes, servers and kills: minutes; `-m 'not slow'` leaves them out

TrialState = optuna.trial.TrialState


def sweep_command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "sweep", str(config), *args]


def children_of(tracking_uri: str, experiment: str = "sweep") -> tuple[list, list]:
    client = mlflow.MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    found = client.search_runs([exp.experiment_id], max_results=5000)
    return (
        [r for r in found if "mlflow.parentRunId" not in r.data.tags],
        [r for r in found if "mlflow.parentRunId" in r.data.tags],
    )


def assert_consistent(storage: str, tracking_uri: str, n_complete: int) -> None:
    """No trial or run left RUNNING; finished child runs = complete trials, one each, under the one parent."""
    study = optuna.load_study(study_name="sweep", storage=storage)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == n_complete
    assert not [t for t in study.trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    parents, children = children_of(tracking_uri)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children)
    assert not [c for c in children if c.info.status == "RUNNING"]
    finished = sorted(int(c.data.tags["sweep.trial"]) for c in children if c.info.status == "FINISHED")
    assert finished == sorted(t.number for t in complete)  # exactly one finished run per complete trial
    numbers = [int(c.data.tags["sweep.trial"]) for c in children]
    assert len(numbers) == len(set(numbers))  # no trial has two runs


def slow_trials(config: Path) -> Path:
    """Every trial a new chunking: its chunks must be encoded, and a worker's first trial loads the model."""
    data = yaml.safe_load(config.read_text())
    data["chunking"] = {"strategy": "fixed", "unit": "tokens", "size": 6, "overlap": 0}
    data["retrieval"]["mode"] = "dense"
    data["search"]["sampler"] = "random"
    data["search"]["space"] = {"chunking.size": {"int": [3, 200]}}
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    return config


def test_three_workers_on_postgresql_run_exactly_the_studys_trials(
    fixture_config, tmp_path, postgres_url, second_postgres_url
):
    slow_trials(fixture_config)  # trials long enough that all three workers take part
    proc = subprocess.run(
        sweep_command(
            fixture_config,
            "--workers",
            "3",
            "--trials",
            "30",
            "--storage",
            postgres_url,
            "--tracking-uri",
            second_postgres_url,
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    study = optuna.load_study(study_name="sweep", storage=postgres_url)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 30 == len({t.params["chunking.size"] for t in complete})
    assert all(
        t.user_attrs.get("fail_kind") == "duplicate" for t in study.trials if t.state != TrialState.COMPLETE
    )
    assert_consistent(postgres_url, second_postgres_url, 30)
    pids = {t.user_attrs["worker"]["pid"] for t in complete}
    assert len(pids) == 3  # all three took part
    assert "[w2]" in proc.stdout and "[w3]" in proc.stdout and "held-out" in proc.stdout


def test_two_workers_on_the_embedded_sqlite_stores(fixture_config, tmp_path):
    proc = subprocess.run(
        sweep_command(fixture_config, "--workers", "2", "--trials", "16"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_consistent(
        f"sqlite:///{tmp_path / 'runs/sweep/optuna.db'}", f"sqlite:///{tmp_path / 'runs/mlflow.db'}", 16
    )


def wait_for_running_trial(
    storage: str, predicate, timeout: float = 120, proc: subprocess.Popen | None = None
) -> optuna.trial.FrozenTrial:
    deadline, last_error = time.monotonic() + timeout, None
    store = (
        None  # one engine, made once the store exists: a new one per poll would use up PostgreSQL's clients
    )
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        try:
            if store is None:
                store = optuna.storages.get_storage(storage)
            study = optuna.load_study(study_name="sweep", storage=store)
            for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                if "pid" in t.user_attrs.get("worker", {}) and predicate(t):
                    return t
        except Exception as e:  # the study may not exist yet
            last_error = e
        time.sleep(0.05)
    if proc is not None:
        proc.kill()
        pytest.fail(
            f"no trial started in time (last error reading the study: {last_error!r}); the sweep printed:\n"
            + proc.communicate()[0][-3000:]
        )
    pytest.fail(f"no trial started in time (last error reading the study: {last_error!r})")


def kill_inside_a_trial(
    storage: str, main: subprocess.Popen, timeout: float = 300
) -> optuna.trial.FrozenTrial:
    """SIGKILL the second worker while it is provably inside a trial, however short its trials are.

    Polling for a RUNNING trial races the worker (a warm trial lasts milliseconds); instead the worker
    is frozen with SIGSTOP, its state read, and it is either killed (inside a stamped trial with its
    parameters drawn) or thawed to run a little further.
    """
    second = wait_for_running_trial(storage, lambda t: t.user_attrs["worker"]["pid"] != main.pid, proc=main)
    pid = second.user_attrs["worker"]["pid"]
    deadline = time.monotonic() + timeout
    store = optuna.storages.get_storage(storage)
    while time.monotonic() < deadline:
        os.kill(pid, signal.SIGSTOP)
        study = optuna.load_study(study_name="sweep", storage=store)
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if (
                t.user_attrs.get("worker", {}).get("pid") == pid
                and t.user_attrs["worker"].get("trial") == t.number
                and t.params
            ):
                os.kill(pid, signal.SIGKILL)
                return t
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
    pytest.fail("the second worker was never caught inside a trial")


def seconds_long_trials(config: Path, n_docs: int = 60) -> Path:
    """Trials that each encode about a hundred new chunks (seconds, not milliseconds, even on a loaded machine),
    so the first worker cannot finish the study before a spawned one has started."""
    slow_trials(config)
    rng = random.Random(0)
    words = " ".join(TOPICS.values()).split()
    with (config.parent / "data/corpus.jsonl").open("a") as corpus:
        for i in range(n_docs):
            corpus.write("\n" + json.dumps({"id": f"filler-{i}", "text": " ".join(rng.choices(words, k=80))}))
    data = yaml.safe_load(config.read_text())
    data["search"]["space"] = {
        "chunking.size": {"int": [20, 60]}
    }  # 41 distinct chunkings, each new to the cache
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    return config


def test_a_worker_killed_mid_trial_is_failed_retried_and_the_study_completes(
    fixture_config, tmp_path, postgres_url
):
    seconds_long_trials(fixture_config)
    main = subprocess.Popen(
        sweep_command(fixture_config, "--workers", "2", "--trials", "16", "--storage", postgres_url),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    victim = kill_inside_a_trial(postgres_url, main)
    out = main.communicate(timeout=600)[0]
    assert main.returncode == 0, out[-4000:]
    study = optuna.load_study(study_name="sweep", storage=postgres_url)
    killed = study.trials[victim.number]
    assert killed.state == TrialState.FAIL and "died" in killed.user_attrs["error"]
    retry = [t for t in study.trials if t.system_attrs.get("failed_trial") == victim.number]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE and retry[0].params == killed.params
    assert len([t for t in study.trials if t.state == TrialState.COMPLETE]) == 16
    assert_consistent(postgres_url, f"sqlite:///{tmp_path / 'runs/mlflow.db'}", 16)
    _, children = children_of(f"sqlite:///{tmp_path / 'runs/mlflow.db'}")
    dead_run = [c for c in children if c.data.tags["sweep.trial"] == str(victim.number)]
    assert [r.info.status for r in dead_run] in ([], ["KILLED"])


def test_sigkill_then_the_same_command_resumes_with_nothing_lost(fixture_config, tmp_path):
    storage = f"sqlite:///{tmp_path / 'runs/sweep/optuna.db'}"
    tracking = f"sqlite:///{tmp_path / 'runs/mlflow.db'}"
    first = subprocess.Popen(
        sweep_command(fixture_config, "--trials", "8"),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_running_trial(storage, lambda t: True)
    first.send_signal(signal.SIGKILL)
    first.wait()
    study = optuna.load_study(study_name="sweep", storage=storage)
    assert [t.state for t in study.trials if t.state == TrialState.RUNNING]  # left behind by the kill
    again = subprocess.run(
        sweep_command(fixture_config, "--trials", "8"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "recovered" in again.stdout
    assert_consistent(storage, tracking, 8)
    _, children = children_of(tracking)
    assert [c.data.tags["sweep.state"] for c in children if c.info.status == "KILLED"] in ([], ["killed"])


def pruning_config(tmp_path: Path, pruner: str) -> Path:
    config = {
        "dataset": {"loader": "python_reference", "path": "bundled"},
        "chunking": {"strategy": "fixed", "size": 100, "overlap": 0},
        "retrieval": {"mode": "bm25", "candidates": 50, "top_k": 10},
        "evaluation": {"ks": [1, 5, 10]},
        "cache_dir": str(tmp_path / "cache"),
        "search": {
            "objective": "ndcg@10",
            "sampler": "random",
            "seed": 5,
            "trials": 16,
            "pruner": pruner,
            "space": {
                "retrieval.candidates": {"categorical": [50, 1]},  # the planted poor region
                "retrieval.bm25.k1": {"float": [0.6, 1.4], "step": 0.1},
            },
        },
    }
    path = tmp_path / f"{pruner}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.mark.parametrize("pruner", ["median", "successive_halving"])
def test_pruning_stops_the_planted_poor_region_and_evaluates_fewer_questions(tmp_path, pruner):
    pruned_run = run_sweep(pruning_config(tmp_path, pruner), runs_dir=tmp_path / "p", quiet=True)
    plain_run = run_sweep(pruning_config(tmp_path, "none"), runs_dir=tmp_path / "n", quiet=True)
    pruned = optuna.load_study(study_name=pruner, storage=pruned_run.storage).trials
    plain = optuna.load_study(study_name="none", storage=plain_run.storage).trials
    fresh = [t for t in pruned if "duplicate_of" not in t.user_attrs]  # repeats are answered, not re-run
    poor = [t for t in fresh if t.params["retrieval.candidates"] == 1 and t.number >= 3]  # after the warm-up
    good = [t for t in fresh if t.params["retrieval.candidates"] == 50]
    assert poor and good
    assert all(t.state == TrialState.PRUNED and t.user_attrs["questions_evaluated"] < 84 for t in poor)
    assert all(t.state == TrialState.COMPLETE for t in good if t.user_attrs.get("questions_evaluated") == 84)
    assert sum(t.user_attrs.get("questions_evaluated", 0) for t in pruned) < sum(
        t.user_attrs.get("questions_evaluated", 0) for t in plain
    )
    assert len([t for t in pruned if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]) == 16
    _, children = children_of(pruned_run.tracking_uri, pruner)
    states = {c.data.tags["sweep.state"] for c in children}
    assert "pruned" in states and "complete" in states


def test_a_trial_that_raises_fails_alone_with_its_reason(fixture_config, tmp_path):
    data = yaml.safe_load(fixture_config.read_text())
    data["retrieval"]["mode"] = "dense"
    data["search"]["space"] = {
        "retrieval.dense.model": {"categorical": ["minilm-l6", "no-such-org/no-such-model"]},
        "retrieval.top_k": {"int": [1, 8]},
    }
    data["search"]["sampler"] = "random"
    fixture_config.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run_sweep(fixture_config, runs_dir=tmp_path / "runs", trials=6, quiet=True)
    study = optuna.load_study(study_name="sweep", storage=result.storage)
    failed = [t for t in study.trials if t.state == TrialState.FAIL and t.user_attrs["fail_kind"] == "error"]
    assert failed and all("no-such-org/no-such-model" in t.user_attrs["error"] for t in failed)
    assert len({t.params["retrieval.top_k"] for t in failed}) == len(
        failed
    )  # a failed configuration is not re-run
    assert all(t.params["retrieval.dense.model"] == "no-such-org/no-such-model" for t in failed)
    assert len([t for t in study.trials if t.state == TrialState.COMPLETE]) == 6  # the sweep went on
    assert len(result.failures) == len(failed) and "cannot load model" in result.failures[0]
    _, children = children_of(result.tracking_uri)
    failed_runs = [c for c in children if c.info.status == "FAILED"]
    assert len(failed_runs) == len(failed) and all(
        "no-such-model" in c.data.tags["sweep.error"] for c in failed_runs
    )


def test_two_workers_on_a_fresh_cache_share_the_encoding_and_each_text_is_encoded_once(tmp_path):
    """Shards of the missing texts go to whichever worker claims them; a worker that waits shows the bar."""
    script = (
        "import json, logging, sys, time\n"
        "from pathlib import Path\n"
        "from sweep.config.schema import DenseConfig\n"
        "from sweep.retrieval.dense import Encoder\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
        "texts = [f'sentence number {i} about sharing the work of embedding' for i in range(2000)]\n"
        "e = Encoder(DenseConfig(model='minilm-l6'), sys.argv[1])\n"
        "e.model()\n"  # loaded before the start line, so both begin encoding together
        "ready = Path(sys.argv[2]); (ready / sys.argv[3]).touch()\n"
        "while len(list(ready.iterdir())) < 2: time.sleep(0.05)\n"
        "e.encode(texts, progress='embedding')\n"
        "print(json.dumps({'encoded': e.stats.encoded, 'cached': e.stats.cached}))\n"
    )
    ready = tmp_path / "ready"
    ready.mkdir()
    env = {**os.environ, "COLUMNS": "100"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "cache"), str(ready), str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outputs]
    stats = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert sum(s["encoded"] for s in stats) == 2000  # every text exactly once, in total
    assert all(s["encoded"] > 0 for s in stats)  # both did some of it
    assert all(s["encoded"] + s["cached"] == 2000 for s in stats)  # and each has all 2000 vectors
    waited = 0
    for (_, err), s in zip(outputs, stats):
        shown = [int(n) for n in re.findall(r"(\d+)/2000 \[", err)]
        assert shown  # each showed the whole encode's progress
        if "another process is computing" in err:  # it waited, and its bar moved with the other's shards
            waited += 1
            assert "waiting for another worker" in err and max(shown) > s["encoded"]
    assert waited >= 1  # the shards were shared, so one of them saw the other's land


def test_a_trial_sees_the_parameters_another_worker_stored_after_it_began(fixture_config):
    """The race CI caught (two trials of one configuration both complete): trial 1 began before trial 0
    had stored its parameters. The duplicate check reads the trials after its own suggestion, so of
    two trials suggesting alike the later to check always finds the other; the lower number runs."""
    from types import SimpleNamespace

    from sweep.tuning.objective import DuplicateTrial, objective
    from sweep.tuning.space import suggest
    from sweep.tuning.sweep_config import load_sweep_config
    from sweep.tuning.trials import KIND_ATTR

    config = load_sweep_config(fixture_config)
    study = optuna.create_study(direction="maximize")
    same = {"retrieval.fusion.method": "rrf", "retrieval.fusion.rrf_k": 30, "retrieval.top_k": 4}
    study.enqueue_trial(same)
    study.enqueue_trial(same)
    first, second = study.ask(), study.ask()  # both running; neither has stored a parameter yet
    suggest(first, config.search, config.baseline_flat)  # the other worker stores its values now
    context = SimpleNamespace(search=config.search, baseline_flat=config.baseline_flat, session="s")
    with pytest.raises(DuplicateTrial, match="repeats trial 0"):
        objective(context, second)
    assert study.trials[1].user_attrs[KIND_ATTR] == "duplicate"
