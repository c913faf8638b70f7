"""Query transformation: RM3, dense PRF, multi-query and plug-in rewriters, against hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path

import mlflow
import numpy as np
import pytest
import yaml

from conftest import write_native_set
from sweep.config.load import load_config
from sweep.config.schema import BM25Config, PRFConfig, RM3Config
from sweep.errors import ConfigError, SweepError
from sweep.pipeline.runner import Pipeline
from sweep.retrieval.bm25 import Analyzer, BM25Index, SparseBM25
from sweep.retrieval.query import rm3_query_weights, rocchio, rrf_by_owner
from sweep.retrieval.results import StageResult
from sweep.tuning.sweep import run_sweep

PLAIN = BM25Config(stopwords="none", stemming="none")


def test_rm3_expansion_terms_and_weights_by_hand():
    docs = ["apple banana", "apple cherry cherry x 42", "date", "elder fig", "grape", "honeydew melon"]
    analyze = Analyzer(PLAIN)
    tokens = [analyze(d) for d in docs]
    index = SparseBM25(tokens, PLAIN)
    from rank_bm25 import BM25Okapi  # the reference scores the first pass

    s = BM25Okapi(tokens, k1=PLAIN.k1, b=PLAIN.b, epsilon=PLAIN.epsilon).get_scores(["apple"])
    s0, s1 = s[0], s[1]
    assert s0 > 0 and s1 > 0 and not s[2:].any()
    got = rm3_query_weights(
        index,
        ["apple"],
        np.array([0, 1]),
        np.array([s0, s1]),
        RM3Config(fb_docs=2, fb_terms=3, original_weight=0.5),
    )
    # relevance model: sum over feedback docs of score * tf / |d| (|d1| = 5 tokens);
    # "x" (one letter) and "42" (digits) are not allowed as expansion terms
    apple, banana, cherry = s0 / 2 + s1 / 5, s0 / 2, 2 * s1 / 5
    top = sorted([("apple", apple), ("banana", banana), ("cherry", cherry)], key=lambda t: -t[1])[:3]
    norm = sum(w for _, w in top)
    want = {t: 0.5 * w / norm for t, w in top}
    want["apple"] += 0.5  # the original query, L1-normalised
    assert set(got) == set(want) and all(got[t] == pytest.approx(want[t], rel=1e-12) for t in want)
    assert sum(got.values()) == pytest.approx(1.0)
    # fb_terms cuts the relevance model to its heaviest terms
    two = rm3_query_weights(
        index, ["apple"], np.array([0, 1]), np.array([s0, s1]), RM3Config(fb_docs=2, fb_terms=1)
    )
    assert set(two) == {max(top, key=lambda t: t[1])[0], "apple"}


def test_rm3_search_ranks_by_the_expanded_query():
    docs = [
        "apple banana",
        "apple cherry cherry",
        "banana split dessert",
        "cherry pie",
        "grape",
        "melon",
        "kiwi",
    ]
    plain = BM25Index(docs, PLAIN).search(["apple"], 7)
    expanded = BM25Index(docs, PLAIN, RM3Config(fb_docs=2, fb_terms=5, original_weight=0.5)).search(
        ["apple"], 7
    )
    assert set(plain.ids[0][plain.ids[0] >= 0]) == {0, 1}  # BM25 alone finds only the apple documents
    found = set(expanded.ids[0][expanded.ids[0] >= 0])
    assert found == {0, 1, 2, 3}  # the expansion terms (banana, cherry) reach the others


def test_rocchio_by_hand():
    q = np.array([[1.0, 0.0]])
    docs = np.array([[0.0, 1.0], [1 / math.sqrt(2), 1 / math.sqrt(2)], [-1.0, 0.0]])
    mixed = rocchio(q, docs, np.array([[1, 0, 2]]), PRFConfig(fb_docs=2, weight=0.5), normalize=True)
    centroid = np.array([(1 / math.sqrt(2) + 0) / 2, (1 / math.sqrt(2) + 1) / 2])
    raw = 0.5 * q[0] + 0.5 * centroid
    assert mixed[0] == pytest.approx(raw / np.linalg.norm(raw))
    assert mixed[0] == pytest.approx([0.84586, 0.53340], abs=1e-5)  # [0.67678, 0.42678] / 0.80011
    untouched = rocchio(q, docs, np.array([[-1, -1, -1]]), PRFConfig(fb_docs=2, weight=0.5), normalize=True)
    assert untouched[0] == pytest.approx(q[0])  # no feedback, no change


def test_rrf_over_a_questions_queries_by_hand():
    # question 0 has two queries: [c1, c2, c3] and [c2, c4]; question 1 one: [c0]
    lists = StageResult(np.array([[1, 2, 3], [2, 4, -1], [0, -1, -1]]), np.zeros((3, 3)))
    fused = rrf_by_owner(lists, np.array([0, 0, 1]), 2, k=60, depth=4, n_chunks=5)
    assert fused.ids[0].tolist() == [2, 1, 4, 3]  # c2: 1/62 + 1/61 beats c1: 1/61, then c4 1/62, c3 1/63
    assert fused.scores[0][:4] == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63])
    assert fused.ids[1].tolist() == [0, -1, -1, -1]


@pytest.fixture()
def rewrites_set(tmp_path: Path) -> Path:
    docs = [
        {"id": "lists", "text": "lists change after creation"},
        {"id": "tuples", "text": "tuples stay fixed"},
        {"id": "dicts", "text": "dictionaries map keys to values"},
    ]
    questions = [
        {
            "id": "q1",
            "text": "mutable sequence",
            "rewrites": ["lists change"],
            "evidence": [{"doc_id": "lists", "grade": 1}],
        },
        {
            "id": "q2",
            "text": "immutable records",
            "rewrites": ["tuples fixed"],
            "evidence": [{"doc_id": "tuples", "grade": 1}],
        },
        {"id": "q3", "text": "keys to values", "evidence": [{"doc_id": "dicts", "grade": 1}]},
    ]
    config = {
        "dataset": {"loader": "native", "path": "data"},
        "retrieval": {"mode": "bm25", "candidates": 3, "top_k": 3, "bm25": {"stemming": "none"}},
        "evaluation": {"ks": [1, 3]},
        "cache_dir": str(tmp_path / "cache"),
    }
    return write_native_set(tmp_path / "data", docs, questions, config)


def test_multi_query_retrieves_each_rewrite_and_fuses(rewrites_set):
    plain = load_config(rewrites_set)
    multi = load_config(rewrites_set, ["retrieval.query.transform=multi_query"])
    before = Pipeline(plain.cache_dir).run(plain).scores.per_question()
    after = Pipeline(multi.cache_dir).run(multi).scores.per_question()
    assert (
        before["q1"]["recall@3"] == 0 and before["q2"]["recall@3"] == 0
    )  # no shared words with the evidence
    assert after["q1"]["mrr"] == 1 and after["q2"]["mrr"] == 1  # each rewrite finds it
    assert after["q3"] == before["q3"]  # no rewrites: the question alone, RRF of one list keeps its order


def test_plugin_rewriter_is_loaded_by_path_and_called_once_per_question(rewrites_set, tmp_path, monkeypatch):
    monkeypatch.setenv("REWRITER_CALLS", str(tmp_path / "calls"))
    over = ["retrieval.query.transform=plugin", "retrieval.query.plugin=rewriter_plugin:rewrite"]
    config = load_config(rewrites_set, over)
    first = Pipeline(config.cache_dir).run(config).scores.per_question()
    assert (tmp_path / "calls").read_text() == "3"
    assert first["q1"]["mrr"] == 1 and first["q2"]["mrr"] == 1
    Pipeline(config.cache_dir).run(
        load_config(rewrites_set, over + ["retrieval.top_k=2"])
    )  # a new process's view
    assert (tmp_path / "calls").read_text() == "3"  # outputs came from the cache


@pytest.mark.parametrize(
    "plugin,message",
    [
        ("no_such_module_xyz:rewrite", "cannot import 'no_such_module_xyz'"),
        ("rewriter_plugin:missing", "has no callable 'missing'"),
        ("rewriter_plugin", "must look like package.module:function"),
    ],
)
def test_a_bad_plugin_path_is_a_config_error(rewrites_set, plugin, message):
    with pytest.raises(ConfigError) as info:
        load_config(rewrites_set, ["retrieval.query.transform=plugin", f"retrieval.query.plugin={plugin}"])
    assert (
        "retrieval.query" in str(info.value)
        and message in str(info.value)
        and str(rewrites_set) in str(info.value)
    )


def test_a_plugin_returning_garbage_is_named(rewrites_set, tmp_path):
    config = load_config(
        rewrites_set, ["retrieval.query.transform=plugin", "retrieval.query.plugin=rewriter_plugin:broken"]
    )
    with pytest.raises(SweepError, match="returned 42"):
        Pipeline(config.cache_dir).run(config)


def test_a_sweep_over_rm3_and_its_feedback_parameters(fixture_config, tmp_path):
    data = yaml.safe_load(fixture_config.read_text())
    data["retrieval"]["mode"] = "bm25"
    data["search"]["sampler"] = "random"
    data["search"]["space"] = {
        "retrieval.query.transform": {"categorical": ["none", "rm3"]},
        "retrieval.query.rm3.fb_docs": {"int": [1, 4], "when": {"retrieval.query.transform": "rm3"}},
        "retrieval.query.rm3.fb_terms": {"int": [2, 10], "when": {"retrieval.query.transform": "rm3"}},
        "retrieval.query.rm3.original_weight": {
            "float": [0.2, 0.8],
            "step": 0.3,
            "when": {"retrieval.query.transform": "rm3"},
        },
    }
    fixture_config.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run_sweep(fixture_config, runs_dir=tmp_path / "runs", trials=8, quiet=True)
    client = mlflow.MlflowClient(result.tracking_uri)
    exp = client.get_experiment_by_name("sweep")
    children = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    rm3_runs = [c for c in children if c.data.params.get("retrieval.query.transform") == "rm3"]
    assert rm3_runs and len(rm3_runs) < len(children)
    assert all(
        {"retrieval.query.rm3.fb_docs", "retrieval.query.rm3.original_weight"} <= set(c.data.params)
        for c in rm3_runs
    )
