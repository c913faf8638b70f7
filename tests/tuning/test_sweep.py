"""The sweep end to end, checked through Optuna's and MLflow's own clients."""

from __future__ import annotations

import mlflow
import optuna
import pytest
import yaml

from sweep.config.load import load_config
from sweep.errors import ConfigError
from sweep.pipeline.runner import Pipeline
from sweep.tuning.sweep import Sweep, run_sweep
from sweep.tuning.trials import best_trial


def test_sweep_logs_every_trial_and_resumes(fixture_config, tmp_path):
    runs = tmp_path / "runs"
    result = run_sweep(fixture_config, runs_dir=runs, quiet=True)

    study = optuna.load_study(study_name="sweep", storage=result.storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 10
    assert study.trials[0].user_attrs["baseline"] is True
    assert study.trials[0].params == {
        "retrieval.fusion.method": "linear",
        "retrieval.fusion.alpha": 0.5,
        "retrieval.top_k": 5,
    }
    for t in study.trials:  # conditional parameters appear only with their condition
        assert ("retrieval.fusion.alpha" in t.params) == (t.params["retrieval.fusion.method"] == "linear")
        assert ("retrieval.fusion.rrf_k" in t.params) == (t.params["retrieval.fusion.method"] == "rrf")

    client = mlflow.MlflowClient(result.tracking_uri)
    exp = client.get_experiment_by_name("sweep")
    runs_found = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs_found if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs_found if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 10
    parent = parents[0]
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert sorted(int(c.data.tags["sweep.trial"]) for c in children) == [t.number for t in complete]
    assert len({tuple(sorted(t.params.items())) for t in complete}) == 10  # ten distinct configurations
    one = children[0]
    assert {"ndcg_at_5", "recall_at_3", "mrr", "objective", "time_metrics_s"} <= set(one.data.metrics)
    assert one.data.metrics["dense_truncated_share"] == 0.0  # hybrid: the dense model read every chunk whole
    assert one.data.params["retrieval.mode"] == "hybrid" and "retrieval.fusion.method" in one.data.params
    artifacts = {a.path for a in client.list_artifacts(one.info.run_id)}
    assert {"config.yaml", "scores.json", "run.trec", "diagnosis.txt"} <= artifacts
    # a figure is drawn for the runs people open, the best trial and the baseline, not for every trial
    with_plot = {
        int(c.data.tags["sweep.trial"])
        for c in children
        if "recall_at_k.png" in {a.path for a in client.list_artifacts(c.info.run_id)}
    }
    baseline_trial = next(t.number for t in complete if t.user_attrs.get("baseline"))
    assert with_plot == {baseline_trial, best_trial(study).number}
    assert exp.artifact_location == (runs / "mlartifacts").resolve().as_uri()  # beside the store
    parent_artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"best_config.yaml", "optimization_history.png"} <= parent_artifacts
    assert parent.data.metrics["best_objective"] == pytest.approx(result.best_value)

    # the exported best configuration, re-evaluated, gives the same objective
    best_yaml = tmp_path / "best.yaml"
    best_yaml.write_text(result.best_config_yaml)
    best = load_config(best_yaml)
    assert Pipeline(best.cache_dir).run(best).scores.mean()["ndcg@5"] == pytest.approx(result.best_value)

    # the same command continues the study to its size: --trials 12 adds two
    before = len(study.trials)
    run_sweep(fixture_config, runs_dir=runs, quiet=True)  # already 10: nothing more to run
    assert len(optuna.load_study(study_name="sweep", storage=result.storage).trials) == before
    run_sweep(fixture_config, runs_dir=runs, trials=12, quiet=True)
    study = optuna.load_study(study_name="sweep", storage=result.storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 12 == len({tuple(sorted(t.params.items())) for t in complete})
    runs_found = client.search_runs([exp.experiment_id], max_results=1000)
    children = [r for r in runs_found if "mlflow.parentRunId" in r.data.tags]
    assert len([r for r in runs_found if "mlflow.parentRunId" not in r.data.tags]) == 1
    assert sorted(int(c.data.tags["sweep.trial"]) for c in children) == [t.number for t in complete]


def test_duplicate_parameters_are_answered_from_the_earlier_trial(fixture_config, tmp_path):
    sweep = Sweep(fixture_config, ["search.sampler=grid"], runs_dir=tmp_path / "r", quiet=True, trials=1)
    sweep.search = sweep.search.model_copy(
        update={"space": {k: v for k, v in sweep.search.space.items() if k == "retrieval.top_k"}}
    )
    sweep.run()
    study = optuna.load_study(study_name="sweep", storage=sweep.storage)
    study.enqueue_trial(study.trials[0].params)
    sweep.trials = 2
    sweep.run()
    study = optuna.load_study(study_name="sweep", storage=sweep.storage)
    assert study.trials[1].user_attrs["duplicate_of"] == 0  # recorded, never re-run, never counted
    assert (
        study.trials[1].state == optuna.trial.TrialState.FAIL
        and study.trials[1].user_attrs["fail_kind"] == "duplicate"
    )
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) == 2
    assert study.trials[2].params != study.trials[0].params  # the second configuration is a new one


@pytest.mark.parametrize(
    "space,message",
    [
        ({"retrieval.fusion.alfa": {"float": [0, 1]}}, "'retrieval.fusion.alfa' is not a configuration key"),
        ({"retrieval.top_k": {"int": [5, 3]}}, "low 5 is above high 3"),
        (
            {
                "retrieval.top_k": {"int": [1, 3], "when": {"retrieval.candidates": 3}},
                "retrieval.candidates": {"int": [1, 9]},
            },
            "not an earlier parameter",
        ),
    ],
)
def test_bad_search_spaces(fixture_config, tmp_path, space, message):
    data = yaml.safe_load(fixture_config.read_text())
    data["search"]["space"] = space
    fixture_config.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError, match=message):
        Sweep(fixture_config, runs_dir=tmp_path / "r", quiet=True)


def test_unknown_objective(fixture_config, tmp_path):
    with pytest.raises(ConfigError, match="unknown metric 'ndgc@10'"):
        Sweep(fixture_config, ["search.objective=ndgc@10"], runs_dir=tmp_path / "r", quiet=True)


def test_multi_objective_sweep_has_a_pareto_front(fixture_config, tmp_path):
    result = run_sweep(
        fixture_config,
        ["search.extra_objectives=[latency_ms]", "search.sampler=random"],
        runs_dir=tmp_path / "runs",
        trials=6,
        quiet=True,
    )
    study = optuna.load_study(study_name="sweep", storage=result.storage)
    assert len(study.directions) == 2 and study.directions[1] == optuna.study.StudyDirection.MINIMIZE
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 6 and all(len(t.values) == 2 and t.values[1] > 0 for t in complete)
    front = {t.number for t in study.best_trials}
    assert set(result.pareto_trials) == front and front
    client = mlflow.MlflowClient(result.tracking_uri)
    exp = client.get_experiment_by_name("sweep")
    parent = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" not in r.data.tags][
        0
    ]
    assert parent.data.tags["sweep.dataset_hash"]
    assert "pareto_front.png" in {a.path for a in client.list_artifacts(parent.info.run_id)}


def test_sigint_finishes_the_current_trial_and_says_how_to_resume(fixture_config, tmp_path):
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "sweep", str(fixture_config), "--trials", "200"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    for line in proc.stdout:  # wait for two finished trials, then interrupt
        lines.append(line)
        if sum("trial" in x and "ndcg@5" in x for x in lines) >= 2:
            proc.send_signal(signal.SIGINT)
            break
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, out
    assert "finishing the current trial" in out and "Resume with the same command" in out
    study = optuna.load_study(
        study_name="sweep", storage=f"sqlite:///{tmp_path / 'runs' / 'sweep' / 'optuna.db'}"
    )
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert all(
        t.user_attrs.get("fail_kind") == "duplicate" for t in study.trials if t not in complete
    )  # nothing running
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("sweep")
    children = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == len(complete) and all(r.info.status == "FINISHED" for r in children)


def test_constraint_and_log_scale_in_the_search_space():
    from sweep.tuning.search import SearchConfig
    from sweep.tuning.space import suggest

    search = SearchConfig.model_validate(
        {
            "space": {
                "chunking.size": {"int": [20, 60], "step": 20},
                "chunking.overlap": {"int": [0, 100], "step": 10, "below": "chunking.size"},
                "retrieval.bm25.k1": {"float": [0.1, 10], "log": True},
            }
        }
    )
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(40):
        trial = study.ask()
        chosen = suggest(trial, search, {})
        assert chosen["chunking.overlap"] < chosen["chunking.size"]
        assert 0.1 <= chosen["retrieval.bm25.k1"] <= 10
        study.tell(trial, 0.0)


def test_study_on_postgresql_storage(fixture_config, tmp_path, postgres_url):
    result = run_sweep(fixture_config, runs_dir=tmp_path / "runs", trials=4, storage=postgres_url, quiet=True)
    study = optuna.load_study(study_name="sweep", storage=postgres_url)
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) == 4
    run_sweep(fixture_config, runs_dir=tmp_path / "runs", trials=5, storage=postgres_url, quiet=True)
    complete = [
        t
        for t in optuna.load_study(study_name="sweep", storage=postgres_url).trials
        if t.state == optuna.trial.TrialState.COMPLETE
    ]
    assert len(complete) == 5 == len({tuple(sorted(t.params.items())) for t in complete})
    assert result.storage == postgres_url
