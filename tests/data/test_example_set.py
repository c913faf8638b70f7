"""The bundled example eval set: every label resolves, and it separates configurations."""

from __future__ import annotations

import json
import sys
from collections import Counter

from conftest import ROOT
from sweep.config.load import load_config
from sweep.data.python_reference import BUNDLED_QUESTIONS, load_python_reference
from sweep.pipeline.runner import Pipeline


def test_every_question_resolves_on_this_python():
    assert sys.version_info[:2] >= (3, 11)
    raw = [json.loads(line) for line in BUNDLED_QUESTIONS.read_text().splitlines() if line.strip()]
    ds = load_python_reference()
    assert ds.dropped == [] and len(ds.questions) == len(raw) >= 120
    assert len(ds.documents) == 79
    texts = {d.id: d.text for d in ds.documents}
    for q, r in zip(ds.questions, raw):
        assert 1 <= len(q.evidence) <= 3
        for ev, spec in zip(q.evidence, r["evidence"]):
            assert ev.grade in (1, 2)
            assert texts[ev.doc_id][ev.start : ev.end] == spec["quote"]
    assert Counter(q.split for q in ds.questions).keys() == {"tune", "heldout"}
    kinds = Counter(q.metadata["kind"] for q in ds.questions)
    assert {"lookup", "keyword", "paraphrase", "two"} == set(kinds) and min(kinds.values()) >= 15


def test_a_quote_missing_from_this_python_is_reported_and_skipped(tmp_path):
    lines = BUNDLED_QUESTIONS.read_text().splitlines()[:3]
    broken = json.loads(lines[1])
    broken["evidence"][0]["quote"] = "text that no Python version has ever contained"
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(broken), lines[2]]))
    ds = load_python_reference(path)
    assert [q.id for q in ds.questions] == ["py000", "py002"]
    assert len(ds.dropped) == 1 and "py001" in ds.dropped[0] and "not found" in ds.dropped[0]


def test_the_set_separates_bm25_dense_and_hybrid(tmp_path):
    config = ROOT / "configs" / "hybrid.yaml"
    cache = f"cache_dir={tmp_path / 'cache'}"
    pipeline = Pipeline(tmp_path / "cache", progress=False)
    ndcg = {
        m: pipeline.run(load_config(config, [f"retrieval.mode={m}", cache])).scores.mean()["ndcg@10"]
        for m in ("bm25", "dense", "hybrid")
    }
    assert ndcg["hybrid"] - max(ndcg["bm25"], ndcg["dense"]) >= 0.03, ndcg
    assert abs(ndcg["bm25"] - ndcg["dense"]) >= 0.03, ndcg
