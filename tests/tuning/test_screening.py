"""Screening: a (model, chunking) pair scored over BM25's candidate pool, and pruned there before its
corpus is encoded, when it is worse than the trials so far."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
import pytrec_eval
import yaml
from sentence_transformers import SentenceTransformer

from conftest import ROOT, write_scifact_slice
from sweep.errors import ConfigError
from sweep.models import resolve_model
from sweep.pipeline.runner import Pipeline
from sweep.pipeline.screen import pool_score
from sweep.tuning.storage import open_storage
from sweep.tuning.sweep import Sweep
from sweep.tuning.sweep_config import load_sweep_config

POOL = 3


def slice_sweep(shared_data, tmp_path, space: dict, trials: int = 5, **search) -> str:
    """30 tuning questions over their abstracts and 120 distractors, one chunk per abstract."""
    data = write_scifact_slice(shared_data, tmp_path / "slice", n_train=30, n_test=10, n_other=120)
    config = {
        "dataset": {"loader": "native", "path": str(data), "include_title": True},
        "chunking": {"strategy": "document"},
        "retrieval": {"mode": "hybrid", "candidates": 20, "top_k": 10, "dense": {"max_seq_length": 128}},
        "evaluation": {"ks": [1, 5, 10], "view": "document"},
        "cache_dir": str(tmp_path / "cache"),
        "search": {
            "objective": "ndcg@10",
            "trials": trials,
            "sampler": "random",
            "holdout": {"tune_split": "train", "heldout_split": "test"},
            "screen": {"pool": POOL},
            **search,
            "space": space,
        },
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def test_the_pool_score_is_dense_retrieval_over_bm25s_pool_as_pytrec_eval_scores_it(shared_data, tmp_path):
    sweep = load_sweep_config(slice_sweep(shared_data, tmp_path, {}))
    config = sweep.for_trial({})
    pipeline = Pipeline(tmp_path / "cache", progress=False)
    encoder = pipeline.encoder(config.retrieval.dense, config)
    p = pipeline.prepare(config)
    assert encoder.missing(p.index_texts) == len(p.chunks)  # nothing encoded before the pool
    found = pool_score(pipeline, config, "ndcg@10", POOL)

    # the reference: BM25's top 3 per question (the pipeline's BM25, checked elsewhere), then bare
    # sentence-transformers over their union, and pytrec_eval
    lexical = config.model_copy(
        update={"retrieval": config.retrieval.model_copy(update={"mode": "bm25", "candidates": POOL})}
    )
    ids = pipeline.bm25(p, lexical, {}).ids
    members = sorted({int(i) for i in ids.ravel() if i >= 0})
    assert found.pool == len(members) < len(p.chunks) == found.chunks
    model = SentenceTransformer(resolve_model("minilm-l6"), device="cpu")
    model.max_seq_length = 128
    docs = model.encode([p.index_texts[i] for i in members], normalize_embeddings=True)
    queries = model.encode(p.queries, normalize_embeddings=True)
    doc_ids = [p.eval_set.documents[p.chunks.doc[i]].id for i in members]
    run = {}
    for qid, row in zip(p.labels.question_ids, queries @ docs.T):
        top = np.argsort(-row, kind="stable")[:10]
        run[qid] = {doc_ids[i]: float(row[i]) for i in top}
    qrels = {q.id: {e.doc_id: e.grade for e in q.evidence} for q in p.eval_set.questions if q.evidence}
    qrels = {q: qrels[q] for q in p.labels.question_ids}
    per_question = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    expected = np.mean([v["ndcg_cut_10"] for v in per_question.values()])
    assert found.value == pytest.approx(expected, abs=1e-6)
    assert encoder.missing(p.index_texts) == len(p.chunks) - len(members)  # the pool's vectors are kept
    assert encoder.stats.encoded == len(members) + len(p.queries)

    bm25_only = config.model_copy(update={"retrieval": config.retrieval.model_copy(update={"mode": "bm25"})})
    assert pool_score(pipeline, bm25_only, "ndcg@10", POOL) is None  # nothing to screen


def test_a_planted_weak_model_is_screened_out_having_encoded_no_more_than_its_pool(
    shared_data, tmp_path, tiny_bi_encoder
):
    space = {
        "retrieval.dense.model": {"categorical": ["minilm-l6", tiny_bi_encoder]},
        "retrieval.fusion.alpha": {"categorical": [0.3, 0.5, 0.7, 0.9]},
    }
    sweep = Sweep(slice_sweep(shared_data, tmp_path, space), runs_dir=tmp_path / "runs", quiet=True)
    # the order is planted: MiniLM's trials finish first, so the median rule has three pool scores
    study = optuna.create_study(
        study_name=sweep.study_name, storage=open_storage(sweep.storage, sweep.search), direction="maximize"
    )
    study.enqueue_trial(sweep.baseline_params(), user_attrs={"baseline": True})
    for params in [("minilm-l6", 0.3), ("minilm-l6", 0.7), ("minilm-l6", 0.9), (tiny_bi_encoder, 0.5)]:
        study.enqueue_trial(dict(zip(space, params)))
    sweep.run()

    trials = optuna.load_study(study_name=sweep.study_name, storage=sweep.storage).get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 4 + ["PRUNED"]
    weak = trials[4]
    assert weak.user_attrs["screened_out"] and weak.user_attrs["questions_evaluated"] == 0
    screened = weak.user_attrs["screen"]
    assert screened["value"] < min(t.intermediate_values[0] for t in trials[:4])
    assert {t.intermediate_values[0] for t in trials[:4]} == {trials[0].intermediate_values[0]}  # one pair

    config = sweep.config_for(weak.params)
    p = sweep.pipeline.prepare(config)
    encoder = Pipeline(tmp_path / "cache", progress=False).encoder(config.retrieval.dense, config)
    assert len(p.chunks) - encoder.missing(p.index_texts) == screened["pool"] < len(p.chunks)


def test_screening_needs_a_single_objective(shared_data, tmp_path):
    path = slice_sweep(shared_data, tmp_path, {}, extra_objectives=["latency_ms"])
    with pytest.raises(ConfigError) as e:
        load_sweep_config(path)
    assert e.value.key.startswith("search") and "single objective" in e.value.message


def test_on_the_bundled_set_the_best_pair_arriving_after_weak_ones_is_not_screened_out(
    tmp_path, tiny_bi_encoder
):
    """Three trials of a weak pair finish first; the better pair (the static model) must pass screening
    on the bundled set's 84 tuning questions, pool 20, and be evaluated in full."""
    space = {
        "retrieval.dense.model": {"categorical": [tiny_bi_encoder, "minilm-l6-static"]},
        "retrieval.fusion.alpha": {"categorical": [0.3, 0.5, 0.7]},
    }
    overrides = [
        f"cache_dir={tmp_path / 'cache'}",
        "retrieval.mode=hybrid",
        "retrieval.dense.backend=torch",
        "retrieval.dense.precision=auto",
        f"retrieval.dense.model={tiny_bi_encoder}",
        "retrieval.fusion.alpha=0.5",
        "search.screen={pool: 20}",
        f"search.space={yaml.safe_dump(space, default_flow_style=True).strip()}",
        "search.trials=4",
    ]
    sweep = Sweep(ROOT / "configs" / "hybrid.yaml", overrides, runs_dir=tmp_path / "runs", quiet=True)
    study = optuna.create_study(
        study_name=sweep.study_name, storage=open_storage(sweep.storage, sweep.search), direction="maximize"
    )
    study.enqueue_trial(sweep.baseline_params(), user_attrs={"baseline": True})
    for params in [(tiny_bi_encoder, 0.3), (tiny_bi_encoder, 0.7), ("minilm-l6-static", 0.5)]:
        study.enqueue_trial(dict(zip(space, params)))
    sweep.run()

    trials = optuna.load_study(study_name=sweep.study_name, storage=sweep.storage).get_trials()
    best = trials[3]
    assert best.params["retrieval.dense.model"] == "minilm-l6-static" and best.state.name == "COMPLETE"
    assert best.user_attrs["screen"]["pool"] < best.user_attrs["screen"]["chunks"]  # screened, on a pool
    assert best.intermediate_values[0] > trials[0].intermediate_values[0]

    def dense_alone(model: str) -> float:  # the pair's own quality (a trial's value mixes in BM25)
        config = sweep.config_for({"retrieval.dense.model": model, "retrieval.mode": "dense"})
        return sweep.pipeline.run(config).scores.mean()["ndcg@10"]

    assert dense_alone("minilm-l6-static") > dense_alone(tiny_bi_encoder) + 0.1  # it is the better pair
