"""The selection-corrected estimate (BBC): checked by hand on two trials, and on planted studies where
every trial is one retriever plus noise, so the truth is known and the best trial's luck is measurable."""

from __future__ import annotations

import mlflow
import numpy as np
import optuna
import pytest

from sweep.analysis.selection import selection_corrected
from sweep.metrics.evaluate import Scores
from sweep.tuning.selection import question_values, record_question_values, study_selection
from sweep.tuning.sweep import run_sweep


def test_two_trials_two_questions_by_hand():
    # resamples {q0,q0}: trial 0 wins, left out q1 where it scores 0; {q1,q1}: trial 1, left out q0: 0;
    # {q0,q1} and {q1,q0} leave nothing out and are not counted. So the estimate is exactly 0, the
    # naive best 0.5.
    e = selection_corrected([[1.0, 0.0], [0.0, 1.0]], n_resamples=400, seed=3)
    assert e.naive == 0.5 and e.corrected == 0.0 and e.low == e.high == 0.0
    assert 0 < e.resamples < 400  # about half leave a question out
    smaller = selection_corrected([[1.0, 0.0], [0.0, 1.0]], maximize=False, n_resamples=400, seed=3)
    assert smaller.naive == 0.5 and smaller.corrected == 1.0  # minimising, the pick scores 1 out of bag


def planted(rng, trials: int, questions: int, noise: float) -> tuple[np.ndarray, float]:
    """Every trial is the same retriever (per-question difficulty ``base``) plus noise: truth = base.mean()."""
    base = rng.beta(2, 2, questions)
    return base + rng.normal(0, noise, (trials, questions)), float(base.mean())


def test_on_planted_studies_the_corrected_estimate_sits_at_the_truth_and_the_naive_best_above_it():
    rng = np.random.default_rng(7)
    naive, corrected, covered = [], [], 0
    for _ in range(12):
        values, truth = planted(rng, trials=30, questions=200, noise=0.3)
        e = selection_corrected(values, seed=0)
        naive.append(e.naive - truth)
        corrected.append(e.corrected - truth)
        covered += e.low <= truth <= e.high
    # the best of 30 is about 2 standard errors (0.3 / sqrt(200) = 0.021) lucky; the estimate is not
    assert np.mean(naive) > 0.035
    assert abs(np.mean(corrected)) < 0.01
    assert covered >= 10


def test_the_estimate_is_the_same_for_a_seed_and_memory_stays_in_blocks(monkeypatch):
    import sweep.analysis.significance as significance

    values, _ = planted(np.random.default_rng(1), trials=8, questions=300, noise=0.2)
    first = selection_corrected(values, seed=5)
    assert selection_corrected(values, seed=5) == first
    monkeypatch.setattr(significance, "BLOCK_VALUES", 3000)  # ten resamples a block, not one draw
    small_blocks = selection_corrected(values, seed=5)
    assert small_blocks.resamples == first.resamples == 1000
    assert small_blocks.corrected == pytest.approx(first.corrected, abs=0.01)  # another stream, same answer


def test_a_study_keeps_values_in_question_order_whatever_order_a_trial_scored_them():
    rng = np.random.default_rng(2)
    values, _ = planted(rng, trials=5, questions=40, noise=0.2)
    ids = [f"q{i:02d}" for i in range(40)]
    study = optuna.create_study(direction="maximize")
    for row in values:
        order = rng.permutation(40)  # batches of a pruned study score the questions in another order
        trial = study.ask()
        record_question_values(trial, Scores([ids[i] for i in order], {"ndcg@10": row[order]}), "ndcg@10")
        study.tell(trial, float(row.mean()))
    got, numbers = question_values(study.get_trials())
    assert numbers == [0, 1, 2, 3, 4] and np.array_equal(got, values)
    assert study_selection(study) == selection_corrected(values)


def test_a_sweep_reports_the_corrected_estimate_in_its_result_and_on_the_mlflow_parent(
    fixture_config, tmp_path
):
    result = run_sweep(fixture_config, ["search.trials=4"], runs_dir=tmp_path / "runs", quiet=True)
    assert result.selection is not None and result.selection.trials >= 2
    assert result.selection.naive == pytest.approx(result.best_value)
    study = optuna.load_study(study_name=result.study_name, storage=result.storage)
    assert study_selection(study) == result.selection  # from the study alone, as recorded
    client = mlflow.MlflowClient(result.tracking_uri)
    parent = client.search_runs([result.experiment_id], "tags.`sweep.parent` = 'true'")
    metrics = parent[0].data.metrics if parent else {}
    if not metrics:  # the parent is the run without a trial tag
        runs = client.search_runs([result.experiment_id])
        metrics = next(r.data.metrics for r in runs if "sweep.trial" not in r.data.tags)
    assert metrics["best_objective_selection_corrected"] == pytest.approx(result.selection.corrected)
    assert "corrected for picking the best" in result.report_path.read_text()
