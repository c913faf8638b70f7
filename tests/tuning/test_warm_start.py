"""``--warm-start STUDY``: an earlier study's best configurations become a new study's first trials."""

from __future__ import annotations

import optuna
import pytest
import yaml

from sweep.cli import main
from sweep.tuning.sweep import run_sweep

METHOD = optuna.distributions.CategoricalDistribution(["linear", "rrf"])
ALPHA = optuna.distributions.FloatDistribution(0, 1, step=0.25)
RRF_K = optuna.distributions.IntDistribution(10, 60, step=10)
TOP_K = optuna.distributions.IntDistribution(3, 5)


def linear(alpha: float, top_k: int) -> dict:
    return {"retrieval.fusion.method": "linear", "retrieval.fusion.alpha": alpha, "retrieval.top_k": top_k}


def plant_old_study(url: str) -> None:
    """An earlier study whose ranking is known: values planted, one duplicate, one pruned trial."""
    study = optuna.create_study(study_name="old", storage=url, direction="maximize")
    lin = {"retrieval.fusion.method": METHOD, "retrieval.fusion.alpha": ALPHA, "retrieval.top_k": TOP_K}
    rrf = {"retrieval.fusion.method": METHOD, "retrieval.fusion.rrf_k": RRF_K, "retrieval.top_k": TOP_K}
    planted = [
        (linear(0.5, 5), lin, 0.70),  # the new baseline
        ({"retrieval.fusion.method": "rrf", "retrieval.fusion.rrf_k": 20, "retrieval.top_k": 4}, rrf, 0.90),
        (linear(1.0, 3), lin, 0.85),
        (linear(0.25, 5), lin, 0.80),  # off the new space's step of 0.5
        (linear(0.0, 4), lin, 0.75),
        (linear(0.0, 4), lin, 0.60),  # the same configuration again, worse: counted once
        (linear(0.5, 3), lin, 0.50),  # sixth best: beyond --warm-start-top 5
    ]
    for params, distributions, value in planted:
        study.add_trial(optuna.trial.create_trial(params=params, distributions=distributions, value=value))
    study.add_trial(
        optuna.trial.create_trial(
            params=linear(0.75, 3),
            distributions=lin,
            state=optuna.trial.TrialState.PRUNED,
            intermediate_values={0: 1.0},
        )
    )


def test_a_new_study_starts_from_the_best_configurations_the_new_space_can_express(
    fixture_config, tmp_path, capsys
):
    runs = tmp_path / "runs"
    (runs / "old").mkdir(parents=True)
    plant_old_study(f"sqlite:///{runs}/old/optuna.db")
    narrower = yaml.safe_load(fixture_config.read_text())  # linear fusion only, alpha on a coarser step
    narrower["search"]["space"] = {
        "retrieval.fusion.method": {"categorical": ["linear"]},
        "retrieval.fusion.alpha": {"float": [0, 1], "step": 0.5},
        "retrieval.top_k": {"int": [3, 5]},
    }
    narrower["search"]["trials"] = 4
    path = tmp_path / "narrower.yaml"
    path.write_text(yaml.safe_dump(narrower))

    run_sweep(path, runs_dir=runs, study="new", warm_start="old", warm_start_top=5)
    new = optuna.load_study(study_name="new", storage=f"sqlite:///{runs}/new/optuna.db")
    assert new.trials[0].params == linear(0.5, 5) and new.trials[0].user_attrs["baseline"]
    assert [t.params for t in new.trials[1:3]] == [linear(1.0, 3), linear(0.0, 4)]
    assert all(t.user_attrs.get("warm_start") for t in new.trials[1:3])
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in new.trials[:3])
    said = capsys.readouterr().out
    assert "warm start from study 'old': 2 configuration(s) queued (its trials 2, 4)" in said
    assert (
        "skipped trial 1 (0.9000): retrieval.fusion.method='rrf' is not among the choices ['linear']" in said
    )
    assert "skipped trial 3 (0.8000): retrieval.fusion.alpha=0.25 is not on the step 0.5 from 0" in said
    assert "skipped trial 0 (0.7000): here the same configuration as the baseline" in said
    assert "trial 6 " not in said and "trial 7 " not in said  # beyond the top 5, and the pruned one


def test_warm_start_errors_are_one_line(fixture_config, tmp_path, capsys):
    runs = tmp_path / "runs"
    argv = [str(fixture_config), "--runs-dir", str(runs), "--trials", "2"]
    assert main([*argv, "--warm-start", "missing"]) == 2
    assert "no study 'missing' under" in capsys.readouterr().err
    assert main([*argv, "--warm-start", "sweep"]) == 2
    assert "that is this sweep's own study" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"retrieval.top_k": 7}, "retrieval.top_k=7 is outside [3, 5]"),
        ({"retrieval.fusion.alpha": 0.3}, "retrieval.fusion.alpha=0.3 is not on the step 0.25 from 0"),
        (
            {"retrieval.mode": "bm25"},
            "retrieval.mode='bm25' is not searched here and the configuration fixes 'hybrid'",
        ),
    ],
)
def test_what_a_space_cannot_express_is_named(fixture_config, params, why):
    from sweep.tuning.sweep_config import load_sweep_config
    from sweep.tuning.warm_start import express

    config = load_sweep_config(fixture_config)
    assert express(params, config.search, config.baseline_flat) == why
