"""End to end through `sweep eval`: configs, caches, filters, and a SciFact slice against references."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import ROOT
from sweep.config.load import load_config
from sweep.errors import ConfigError
from sweep.pipeline.runner import Pipeline

DOCS = [
    {
        "id": "py",
        "text": "Python lists are mutable sequences. Tuples are immutable sequences.",
        "metadata": {"lang": "en"},
    },
    {
        "id": "rs",
        "text": "Rust vectors grow on the heap. Slices borrow a view of them.",
        "metadata": {"lang": "en"},
    },
    {"id": "de", "text": "Python Listen sind veränderbare Folgen von Objekten.", "metadata": {"lang": "de"}},
    {
        "id": "sky",
        "text": "The sky is blue because air scatters short wavelengths of sunlight.",
        "metadata": {"lang": "en"},
    },
]
QUESTIONS = [
    {
        "id": "q1",
        "text": "Are tuples immutable?",
        "evidence": [{"doc_id": "py", "grade": 2, "quote": "Tuples are immutable"}],
    },
    {"id": "q2", "text": "Why is the sky blue?", "evidence": [{"doc_id": "sky", "grade": 1}]},
    {
        "id": "q3",
        "text": "Python Listen",
        "filters": {"lang": "en"},
        "evidence": [{"doc_id": "py", "grade": 1}],
    },
    {"id": "q4", "text": "unlabelled", "evidence": [{"doc_id": "rs", "grade": 0}]},
]


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in DOCS))
    (data / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS))
    config = {
        "dataset": {"loader": "native", "path": "data"},
        "chunking": {"strategy": "fixed", "size": 6, "overlap": 2, "unit": "tokens", "tokenizer": "word"},
        "retrieval": {
            "mode": "hybrid",
            "candidates": 10,
            "top_k": 5,
            "fusion": {"alpha": 0.5},
            "bm25": {"stemming": "none"},
        },
        "cache_dir": str(tmp_path / "cache"),
    }
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "tiny.yaml"


def test_second_run_encodes_nothing_and_reads_stage_caches(tiny):
    config = load_config(tiny)
    first = Pipeline(config.cache_dir).run(config)
    assert first.counters["texts_encoded"] > 0 and first.counters["dense_computed"] == 1
    second = Pipeline(config.cache_dir).run(config)  # a fresh process: only the disk cache is shared
    assert second.counters["texts_encoded"] == 0
    assert second.counters["bm25_disk_hits"] == 1 and second.counters["dense_disk_hits"] == 1
    assert second.scores.mean() == first.scores.mean()
    # changing only the fusion re-uses both first stages, in memory
    pipeline = Pipeline(config.cache_dir)
    pipeline.run(config)
    pipeline.run(load_config(tiny, ["retrieval.fusion.method=rrf"]))
    assert pipeline.counters["bm25_memory_hits"] == 1 and pipeline.counters["dense_memory_hits"] == 1


def test_new_text_is_the_only_thing_encoded(tiny):
    config = load_config(tiny)
    Pipeline(config.cache_dir).run(config)
    bigger = load_config(tiny, ["chunking.size=7"])  # new chunk texts, same questions
    result = Pipeline(config.cache_dir).run(bigger)
    assert (
        0
        < result.counters["texts_encoded"]
        <= result.counters["texts_encoded"] + result.counters["texts_from_cache"]
    )
    assert result.counters["texts_from_cache"] >= 3  # the questions were cached


def test_filters_and_unanswerable_questions(tiny):
    config = load_config(tiny, ["retrieval.mode=bm25"])
    result = Pipeline(config.cache_dir).run(config)
    assert result.scores.skipped == ["q4"]
    rows = result.scores.question_ids
    ids = result.run.ids[rows.index("q3")]
    p = Pipeline(config.cache_dir).prepare(config)
    docs = {p.eval_set.documents[p.chunks.doc[i]].id for i in ids if i >= 0}
    assert "de" not in docs and "py" in docs  # the German doc matches best, but is filtered out


def test_span_question_gets_char_metrics(tiny):
    config = load_config(tiny, ["retrieval.mode=bm25"])
    result = Pipeline(config.cache_dir).run(config)
    assert "char_recall@5" in result.chunk_scores.values
    assert result.chunk_scores.per_question()["q1"]["char_recall@5"] == 1.0


@pytest.mark.parametrize(
    "override,message",
    [
        ("retrieval.mode=sparse", "retrieval.mode: Input should be 'bm25', 'dense' or 'hybrid'"),
        ("retrieval.bm25.k3=1", "retrieval.bm25.k3: unknown key"),
        ("chunking.overlap=6", "overlap (6) must be smaller than size (6)"),
        ("retrieval.fusion.alpha=2", "retrieval.fusion.alpha: Input should be less than or equal to 1"),
        ("retrieval", "an override must look like key.path=value"),
    ],
)
def test_config_errors_name_the_key(tiny, override, message):
    with pytest.raises(ConfigError) as info:
        load_config(tiny, [override])
    assert str(tiny) in str(info.value) and message in str(info.value)


def test_cli_eval_prints_and_writes_json(tiny, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "eval", str(tiny), "retrieval.mode=bm25", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=tiny.parent,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "recall@k" in proc.stdout
        and "ndcg" in proc.stdout
        and "95% bootstrap CI (3 questions): ndcg@" in proc.stdout
    )
    assert "diagnosis (" in proc.stdout
    data = json.loads(out.read_text())
    assert set(data) == {"mean", "per_question", "skipped", "questions"} and data["skipped"] == ["q4"]
    assert set(data["questions"]) == set(data["per_question"])  # texts, for `sweep compare`


def test_cli_error_is_one_line_without_traceback(tiny):
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "eval", str(tiny), "retrieval.top_k=zero"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "retrieval.top_k" in proc.stderr and "Traceback" not in proc.stderr


def test_scifact_slice_dense_matches_bare_sentence_transformers(shared_data, tmp_path):
    """A small-slice version of the full reproduction (scripts/reproduce.py)."""
    import pytrec_eval
    from sentence_transformers import SentenceTransformer

    from sweep.data import load_beir
    from sweep.models import resolve_model

    full = load_beir(shared_data / "scifact", "test")
    questions = full.questions[:30]
    wanted = {e.doc_id for q in questions for e in q.evidence}
    docs = [d for d in full.documents if d.id in wanted] + [
        d for d in full.documents[:150] if d.id not in wanted
    ]
    data = tmp_path / "slice"
    data.mkdir()
    (data / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) for d in docs)
    )
    (data / "questions.jsonl").write_text(
        "\n".join(
            json.dumps(
                {
                    "id": q.id,
                    "text": q.text,
                    "evidence": [{"doc_id": e.doc_id, "grade": e.grade} for e in q.evidence],
                }
            )
            for q in questions
        )
    )
    cfg = {
        "dataset": {"loader": "native", "path": str(data)},
        "chunking": {"strategy": "document"},
        "retrieval": {"mode": "dense", "candidates": 20, "top_k": 20},
        "cache_dir": str(tmp_path / "c"),
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(cfg))
    result = Pipeline(str(tmp_path / "c")).run(load_config(tmp_path / "s.yaml"))

    model = SentenceTransformer(resolve_model("minilm-l6"), device="cpu")
    d = model.encode([f"{x.title} {x.text}" for x in docs], normalize_embeddings=True)
    q = model.encode([x.text for x in questions], normalize_embeddings=True)
    sims = q @ d.T
    reference = np.argsort(-sims, axis=1, kind="stable")[:, :20]
    agree = (result.run.ids == reference).mean()
    assert agree > 0.98  # float ties and BLAS order may swap near-equal neighbours

    run = {x.id: {docs[j].id: float(sims[i, j]) for j in reference[i]} for i, x in enumerate(questions)}
    qrels = {x.id: {e.doc_id: e.grade for e in x.evidence} for x in questions}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(run)
    ours = result.scores.per_question()
    assert np.mean([ours[k]["ndcg@10"] for k in ref]) == pytest.approx(
        np.mean([v["ndcg_cut_10"] for v in ref.values()]), abs=0.02
    )


def test_shipped_configs_load():
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        config = load_config(path)
        assert config.dataset.path == "bundled" or Path(config.dataset.path).exists(), path


def test_semantic_chunking_embeds_sentences_once_through_the_cache(fixture_config):
    from sweep.config.load import load_config

    over = ["retrieval.mode=bm25", "chunking.strategy=semantic", "chunking.size=40", "chunking.unit=chars"]
    config = load_config(fixture_config, over)
    first = Pipeline(config.cache_dir, progress=False).run(config)
    assert first.counters["texts_encoded"] > 0 and all(len(t) <= 40 for t in first.chunks.texts)
    again = Pipeline(config.cache_dir, progress=False).run(config)  # a new process's view
    assert again.counters["texts_encoded"] == 0 and again.counters["texts_from_cache"] > 0
    assert again.chunks.texts == first.chunks.texts and again.scores.mean() == first.scores.mean()


def test_a_long_sweeps_memory_is_bounded_and_evicted_work_gives_the_same_numbers(tiny, monkeypatch):
    """Prepared chunkings and stage results are kept in bounded LRUs; what falls out is rebuilt (chunks)
    or read back from disk (stage results) with the same scores."""
    import sweep.pipeline.runner as runner

    monkeypatch.setattr(runner, "ARRAYS_KEPT_BYTES", 1)  # no stage result fits: each comes from disk
    sizes = [4, 5, 6, 7, 8]
    configs = [
        load_config(tiny, ["retrieval.mode=bm25", f"chunking.size={s}", "chunking.overlap=1"]) for s in sizes
    ]
    pipeline = Pipeline(configs[0].cache_dir)
    first = [pipeline.run(c).scores.mean() for c in configs]
    assert len(pipeline._prepared) == runner.PREPARED_KEPT < len(sizes) and len(pipeline._stages) == 0
    again = pipeline.run(configs[0])  # its chunks were evicted: rebuilt, its BM25 ranking read from disk
    assert again.scores.mean() == first[0] and pipeline.counters["bm25_disk_hits"] == 1
    assert len({tuple(sorted(m.items())) for m in first}) > 1  # the chunkings differ, so eviction was tested


def test_a_faiss_index_is_built_once_per_build_setting_and_searched_with_each_trials_knobs(tiny, monkeypatch):
    """efSearch, nprobe and the candidate depth change what is searched, not what is built: a sweep builds
    the HNSW graph (or IVF lists) once per build setting, and each result equals a fresh pipeline's."""
    import sweep.retrieval.faiss_index as faiss_index

    builds = []
    real_build = faiss_index.build_index
    monkeypatch.setattr(faiss_index, "build_index", lambda v, c: builds.append(c.index) or real_build(v, c))
    trials = [
        ["retrieval.dense.index=hnsw", "retrieval.dense.hnsw_m=4", "retrieval.dense.hnsw_ef_search=1"],
        ["retrieval.dense.index=hnsw", "retrieval.dense.hnsw_m=4", "retrieval.dense.hnsw_ef_search=64"],
        ["retrieval.dense.index=hnsw", "retrieval.dense.hnsw_m=4", "retrieval.candidates=7"],
        ["retrieval.dense.index=hnsw", "retrieval.dense.hnsw_m=8"],  # a new graph
        ["retrieval.dense.index=ivf", "retrieval.dense.ivf_lists=1", "retrieval.dense.ivf_probe=1"],
        ["retrieval.dense.index=ivf", "retrieval.dense.ivf_lists=1", "retrieval.dense.ivf_probe=4"],
    ]
    configs = [load_config(tiny, ["retrieval.mode=dense", *t]) for t in trials]
    sweep = Pipeline(configs[0].cache_dir, progress=False)
    results = [sweep.run(c) for c in configs]
    assert builds == ["hnsw", "hnsw", "ivf"]
    index = next(i for i in sweep._faiss.values() if i.config.index == "hnsw" and i.config.hnsw_m == 4)
    assert index._index.hnsw.efSearch == 16  # the third trial's default was set at its search
    for config, result in zip(configs, results):  # a fresh build for each trial alone gives the same ranking
        alone = Pipeline(config.cache_dir, progress=False, serving=True)  # serving: no stage output is cached
        ranking = alone.retrieve(alone.prepare(config), config, {}).head(config.retrieval.top_k)
        assert (ranking.ids == result.run.ids).all() and np.allclose(ranking.scores, result.run.scores)
