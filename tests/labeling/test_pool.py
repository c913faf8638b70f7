"""Pools: every pooled retriever's top depth is in the pool, no passage twice, order blind to rank."""

from __future__ import annotations

from test_label_page import corpus

from sweep.config.load import load_config
from sweep.data.model import Question
from sweep.labeling.pool import Passage, build_pools, merge_overlapping, pool_configs
from sweep.pipeline.runner import Pipeline
from sweep.serving.retriever import Hit, Retriever


def hit(doc: str, start: int, end: int) -> Hit:
    return Hit(doc, start, end, "", 0.0, f"{doc}#{start}-{end}")


def test_overlapping_spans_of_a_document_become_one_passage():
    passages = merge_overlapping(
        [
            ("bm25", hit("a", 0, 10)),
            ("dense", hit("a", 5, 20)),
            ("dense", hit("a", 20, 30)),
            ("bm25", hit("b", 0, 10)),
        ]
    )
    assert sorted(passages, key=lambda p: (p.doc_id, p.start)) == [
        Passage("a", 0, 20),
        Passage("a", 20, 30),
        Passage("b", 0, 10),
    ]  # touching is not overlapping
    assert next(p for p in passages if p.start == 0 and p.doc_id == "a").sources == ("bm25", "dense")


def test_each_retrievers_top_depth_is_in_the_pool_and_no_passage_twice(tmp_path):
    config = load_config(corpus(tmp_path))
    pipeline = Pipeline(config.cache_dir, progress=False, serving=True)
    retrievers = {name: Retriever(c, pipeline) for name, c in pool_configs(config, ("bm25", "dense")).items()}
    questions = [Question("q1", "how do I install it", ()), Question("q2", "is the cache shared", ())]
    pools = build_pools(questions, retrievers, depth=3)
    for q in questions:
        pool = pools[q.id]
        for name, retriever in retrievers.items():
            for h in retriever.search(q.text, k=3):  # inside a passage that names the retriever
                assert any(
                    p.doc_id == h.doc_id and p.start <= h.start and h.end <= p.end and name in p.sources
                    for p in pool
                )
        for a in pool:
            for b in pool:
                assert a is b or a.doc_id != b.doc_id or a.end <= b.start or b.end <= a.start
    assert build_pools(questions, retrievers, depth=3) == pools  # the same order every time
    ranked = [(h.doc_id, h.start) for h in retrievers["bm25"].search(questions[0].text, k=3)]
    assert len(pools["q1"]) >= len(ranked)


def test_from_study_adds_the_best_trials_and_the_baseline_to_every_pool(fixture_config, tmp_path):
    import optuna

    from sweep.labeling.session import open_session
    from sweep.tuning.sweep import run_sweep
    from sweep.tuning.sweep_config import load_sweep_config

    runs = tmp_path / "runs"
    result = run_sweep(fixture_config, trials=4, runs_dir=runs, quiet=True)
    first = open_session(fixture_config, tmp_path / "session", depth=2, modes=("bm25",))
    before = {q: list(p) for q, p in first.pools.items()}
    session = open_session(
        fixture_config, tmp_path / "session", depth=2, modes=("bm25",), from_study="sweep", runs_dir=runs
    )
    study = optuna.load_study(study_name="sweep", storage=result.storage)
    top = sorted((t for t in study.trials if t.state.name == "COMPLETE"), key=lambda t: -t.value)[:3]
    sweep_config = load_sweep_config(fixture_config)
    for t in top:
        retriever = Retriever(sweep_config.for_trial(t.params))
        for qid, text in session.store.state.questions.items():
            pool = session.pools[qid]
            for h in retriever.search(text, k=2):  # each of the three best trials' top 2 is pooled
                assert any(p.doc_id == h.doc_id and p.start <= h.start and h.end <= p.end for p in pool)
            assert any(f"trial {t.number}" in p.sources for p in pool)
    for qid, pool in session.pools.items():
        assert all(
            any(p.doc_id == b.doc_id and p.start <= b.start and b.end <= p.end for p in pool)
            for b in before[qid]
        )
        assert any("baseline" in p.sources for p in pool)
