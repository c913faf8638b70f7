"""The tuned configuration as a retriever: the same rankings as the sweep's pipeline, in every framework."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sweep.config.load import load_config
from sweep.pipeline.runner import Pipeline
from sweep.serving.retriever import Retriever

MODES = [
    ["retrieval.mode=bm25"],
    ["retrieval.mode=dense"],
    ["retrieval.mode=hybrid", "retrieval.fusion.method=rrf"],
    ["retrieval.mode=hybrid", "retrieval.query.transform=rm3", "retrieval.rerank.enabled=true"],
    [
        "retrieval.mode=dense",
        "retrieval.query.transform=dense_prf",
        "chunking.strategy=fixed",
        "chunking.size=4",
        "chunking.unit=tokens",
        "chunking.overlap=1",
        "evaluation.view=document",
    ],
]


def expected_rankings(config) -> tuple[list[str], list[list[str]], list[list[float]]]:
    """What the sweep scores: the questions, and each one's ranked chunk ids and scores."""
    result = Pipeline(config.cache_dir, progress=False).run(config)
    p = Pipeline(config.cache_dir, progress=False).prepare(config)
    names = [
        f"{p.eval_set.documents[d].id}#{s}-{e}" for d, s, e in zip(p.chunks.doc, p.chunks.start, p.chunks.end)
    ]
    ids = [[names[i] for i in row if i >= 0] for row in result.run.ids]
    scores = [
        [float(s) for s, i in zip(srow, row) if i >= 0]
        for srow, row in zip(result.run.scores, result.run.ids)
    ]
    return p.queries, ids, scores


@pytest.mark.parametrize("overrides", MODES, ids=lambda o: " ".join(x.split("=")[1] for x in o))
def test_every_question_gets_the_ranking_the_sweep_scored(fixture_config, overrides):
    config = load_config(fixture_config, overrides)
    queries, ids, scores = expected_rankings(config)
    retriever = Retriever(config)
    batch = retriever.search_many(queries)
    one_by_one = [retriever.search(q) for q in queries]
    for hits in (batch, one_by_one):
        got = [[h.chunk_id for h in row] for row in hits]
        if config.evaluation.view == "document":  # each document once, at its best chunk
            assert [[h.doc_id for h in row] for row in hits] == [
                list(dict.fromkeys(c.split("#")[0] for c in row)) for row in ids
            ]
        else:
            assert got == ids
            assert [[h.score for h in row] for row in hits] == scores
    hit = next(row[0] for row in batch if row)
    doc = next(d for d in retriever.documents if d.id == hit.doc_id)
    assert doc.text[hit.start : hit.end] == hit.text


def test_k_and_metadata_filters(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    docs = [
        {
            "id": f"d{i}",
            "text": f"python {'lists' if i in (1, 5) else 'tuples'} number {i}",
            "metadata": {"lang": "en" if i < 4 else "de"},
        }
        for i in range(8)
    ]
    (data / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    (data / "questions.jsonl").write_text(
        json.dumps({"id": "q", "text": "python lists", "evidence": [{"doc_id": "d1", "grade": 1}]})
    )
    config = {
        "dataset": {"loader": "native", "path": "data"},
        "chunking": {"strategy": "document"},
        "retrieval": {"mode": "bm25", "candidates": 8, "top_k": 5, "bm25": {"stemming": "none"}},
        "cache_dir": str(tmp_path / "cache"),
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    retriever = Retriever.from_config(tmp_path / "c.yaml")
    assert len(retriever.search("python lists")) == 5
    assert len(retriever.search("python lists", k=2)) == 2
    german = retriever.search("python lists", filters={"lang": "de"})
    assert {h.doc_id for h in german} == {"d4", "d5", "d6", "d7"}
    assert german[0].doc_id == "d5"  # the one about lists
    assert all(h.metadata["lang"] == "de" for h in german)
    assert retriever.search("no such words at all") == []  # BM25 returns only chunks that share a term


def test_langchain_and_llamaindex_adapters_return_the_retrievers_hits(fixture_config):
    from langchain_core.retrievers import BaseRetriever as LangChainBase
    from llama_index.core.retrievers import BaseRetriever as LlamaIndexBase

    from sweep.integrations.langchain import SweepRetriever as LangChainRetriever
    from sweep.integrations.llamaindex import SweepRetriever as LlamaIndexRetriever

    retriever = Retriever.from_config(fixture_config)
    question = "which sequence type can change after creation"
    hits = retriever.search(question, k=3)
    lc = LangChainRetriever(retriever=retriever, k=3)
    assert isinstance(lc, LangChainBase)
    docs = lc.invoke(question)
    assert [(d.metadata["doc_id"], d.page_content, d.metadata["score"]) for d in docs] == [
        (h.doc_id, h.text, h.score) for h in hits
    ]
    li = LlamaIndexRetriever(retriever, k=3)
    assert isinstance(li, LlamaIndexBase)
    nodes = li.retrieve(question)
    assert [(n.node.ref_doc_id, n.node.get_content(), n.score) for n in nodes] == [
        (h.doc_id, h.text, h.score) for h in hits
    ]


def test_serving_new_questions_leaves_the_cache_as_it_was_and_answers_as_the_sweep_would(fixture_config):
    config = load_config(
        fixture_config, ["retrieval.mode=hybrid", "retrieval.rerank.enabled=true", "retrieval.rerank.depth=5"]
    )
    retriever = Retriever(config)
    assert (
        retriever._prepared.labels.n_questions == retriever._prepared.doc_labels.n_questions == 0
    )  # none resolved
    retriever.search("warm up: the indexes are built and the chunks embedded")

    def files() -> dict[str, int]:
        return {str(p): p.stat().st_size for p in Path(config.cache_dir).rglob("*") if p.is_file()}

    before = files()
    queries = Pipeline(config.cache_dir, progress=False).prepare(config).queries
    served = retriever.search_many(queries)  # questions the cache has never seen
    assert files() == before  # no query vector or pair score of a served question is kept

    _, ids, scores = expected_rankings(config)  # the sweep's pipeline: computed and cached
    assert [[h.chunk_id for h in row] for row in served] == ids
    assert [h.score for row in served for h in row] == pytest.approx(
        [s for row in scores for s in row], abs=1e-6
    )
