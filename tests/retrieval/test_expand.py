"""Small-to-big (retrieval.expand: parent): parents found by hand, rankings expanded, metrics on what is served."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import write_native_set
from sweep.chunking import ChunkingConfig, ChunkSet, chunk_corpus
from sweep.chunking.parents import parent_of
from sweep.config.load import load_config
from sweep.data.model import Document, EvalSet
from sweep.errors import ConfigError
from sweep.pipeline.runner import Pipeline
from sweep.retrieval import StageResult
from sweep.retrieval.expand import expand_to_parents
from sweep.serving.retriever import Retriever


def chunk_set(doc, start, end):
    return ChunkSet(np.array(doc), np.array(start), np.array(end), ["x"] * len(doc))


def test_each_child_goes_to_the_parent_it_overlaps_most():
    parents = chunk_set([0, 0, 1], [0, 10, 0], [9, 20, 8])  # a gap at 9..10 in document 0
    children = chunk_set([0, 0, 0, 0, 1], [0, 7, 9, 14, 2], [5, 12, 10, 20, 4])
    # [7, 12): 2 chars in the first parent, 2 in the second: a tie goes to the earlier one;
    # [9, 10) lies in the gap: the parent before it
    assert parent_of(children, parents).tolist() == [0, 0, 0, 1, 2]
    assert parent_of(chunk_set([0], [6], [15]), parents).tolist() == [1]  # 3 chars vs 5


def test_a_child_before_its_documents_first_parent_goes_to_that_parent():
    parents = chunk_set([0, 1], [0, 5], [4, 9])
    assert parent_of(chunk_set([1], [0], [3]), parents).tolist() == [1]


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet="ab .\n", min_size=1, max_size=200),
    child=st.integers(1, 12),
    parent=st.integers(13, 60),
)
def test_every_child_lies_mostly_in_its_parent(text, child, parent):
    """Fixed parents tile the text, so a child's parent holds at least as much of it as any other."""
    eval_set = EvalSet("t", [Document("d", text)], [])
    children = chunk_corpus(eval_set, ChunkingConfig("fixed", child, 0, "chars"))
    parents = chunk_corpus(eval_set, ChunkingConfig("fixed", parent, 0, "chars"))
    if not len(children) or not len(parents):
        return
    found = parent_of(children, parents)
    for i, p in enumerate(found):
        overlaps = np.minimum(parents.end, children.end[i]) - np.maximum(parents.start, children.start[i])
        assert overlaps[p] == overlaps.max()


def test_a_parent_several_hits_share_is_served_once_at_its_best_hit():
    ranked = StageResult(
        np.array([[3, 0, 1, 2, -1], [2, 2, -1, -1, -1]]),
        np.array([[0.9, 0.8, 0.7, 0.6, -np.inf], [0.5, 0.4, -np.inf, -np.inf, -np.inf]], np.float32),
    )
    served = expand_to_parents(ranked, np.array([7, 7, 8, 9]))
    assert served.ids.tolist() == [[9, 7, 8, -1, -1], [8, -1, -1, -1, -1]]
    assert served.scores[0, :3].tolist() == pytest.approx([0.9, 0.8, 0.6])
    assert np.isneginf(served.scores[0, 3:]).all() and np.isneginf(served.scores[1, 1:]).all()


SENTENCES = [
    "Alpha beta gamma.",
    "Zebra stripes confuse biting flies.",
    "Kappa lambda mu.",
    "Nu xi omicron.",
    "Pi rho sigma.",
    "Tau upsilon phi.",
]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    text = " ".join(SENTENCES)
    docs = [
        {"id": "a", "text": text},
        {"id": "b", "text": "Horses graze in fields. Zebra crossings help people cross roads."},
    ]
    quotes = ["Alpha beta gamma.", "Zebra stripes confuse biting flies."]
    questions = [
        {
            "id": "q1",
            "text": "why do zebra stripes confuse flies",
            "evidence": [{"doc_id": "a", "quote": q, "grade": 1} for q in quotes],
        }
    ]
    config = {
        "dataset": {"loader": "native", "path": "data", "include_title": False},
        "chunking": {"strategy": "sentence", "size": 1, "overlap": 0},
        "retrieval": {"mode": "bm25", "top_k": 5, "candidates": 10, "bm25": {"stopwords": "none"}},
        "evaluation": {"ks": [1, 3]},
        "cache_dir": str(tmp_path / "cache"),
    }
    return write_native_set(tmp_path / "data", docs, questions, config)


def test_small_to_big_changes_the_served_text_and_the_metrics_follow(corpus):
    small = load_config(corpus)
    expand = ["retrieval.expand.to=parent", "retrieval.expand.strategy=sentence", "retrieval.expand.size=3"]
    big = load_config(corpus, expand)
    pipeline = Pipeline(small.cache_dir, progress=False)
    before, after = pipeline.run(small), pipeline.run(big)
    # small chunks: the zebra sentence first, one of the two evidence sentences -> recall@1 = 1/2
    assert before.chunks.texts[before.run.ids[0, 0]] == SENTENCES[1]
    assert before.scores.mean()["recall@1"] == pytest.approx(0.5)
    # its parent, sentences 1-3 of document a, holds both -> recall@1 = 1; the parent appears once
    top = after.run.ids[0]
    assert after.chunks.texts[top[0]] == " ".join(SENTENCES[:3])
    assert after.scores.mean()["recall@1"] == pytest.approx(1.0)
    assert len(set(top[top >= 0].tolist())) == len(top[top >= 0])
    # the other zebra's parent (all of b) second; nothing else shares a term: 1 relevant of 3
    assert after.chunks.texts[top[1]].startswith("Horses") and top[2:].tolist() == [-1, -1, -1]
    assert after.scores.mean()["precision@3"] == pytest.approx(1 / 3)
    hits = Retriever(big).search("why do zebra stripes confuse flies", k=1)
    assert hits[0].text == " ".join(SENTENCES[:3]) and (hits[0].doc_id, hits[0].start) == ("a", 0)


def test_documents_as_parents_score_exactly_as_the_document_view(corpus):
    config = load_config(corpus, ["retrieval.expand.to=parent", "retrieval.expand.strategy=document"])
    result = Pipeline(config.cache_dir, progress=False).run(config)
    chunk, doc = result.chunk_scores.values, result.doc_scores.values
    assert set(doc) < set(chunk)  # the chunk view adds the span measures
    assert all(np.array_equal(chunk[name], doc[name]) for name in doc)


def test_the_shorthand_and_the_bounds(corpus):
    assert load_config(corpus, ["retrieval.expand=parent"]).retrieval.expand.to == "parent"
    with pytest.raises(ConfigError, match=r"retrieval.expand.size \(1\) must be larger than chunking.size"):
        too_small = ["retrieval.expand.to=parent", "retrieval.expand.size=1"]
        load_config(corpus, ["chunking.strategy=fixed", "chunking.size=5"] + too_small)
    with pytest.raises(ConfigError, match="needs chunks smaller than documents"):
        load_config(corpus, ["chunking.strategy=document", "retrieval.expand=parent"])
