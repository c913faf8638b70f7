"""Benchmarks, printed as figures and ratios measured in one run.

    ./scripts/bench [--only bootstrap,trial,sweep_trial,scale,metrics,bm25,encode,eval,sweep,workers,inference,screen] [--questions 10000]

Ratios, not absolute times, are the targets: the machines are shared and
noisy. The last line is one JSON object with every headline figure.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def best_of(fn, repeat: int = 5) -> float:
    """Median wall time of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def synthetic(n_q: int, depth: int = 100, n_rel: int = 5, n_docs: int = 200_000, seed: int = 0):
    rng = np.random.default_rng(seed)
    rel = rng.integers(0, n_docs, size=(n_q, n_rel))
    run = rng.integers(0, n_docs, size=(n_q, depth))
    # plant about half the relevant documents at random ranks
    planted = rng.random((n_q, n_rel)) < 0.5
    ranks = rng.integers(0, depth, size=(n_q, n_rel))
    rows = np.repeat(np.arange(n_q)[:, None], n_rel, axis=1)
    run[rows[planted], ranks[planted]] = rel[planted]
    # no duplicate ids inside a ranking (string-keyed references would collapse them)
    for i in range(n_q):
        _, first = np.unique(run[i], return_index=True)
        dup = np.setdiff1d(np.arange(depth), first)
        run[i, dup] = n_docs + i * depth + dup
    grades = rng.integers(1, 3, size=(n_q, n_rel))
    return run, rel, grades


def bench_metrics(n_q: int) -> dict:
    from sweep.labels import document_labels
    from sweep.metrics import evaluate

    run, rel, grades = synthetic(n_q)
    n_rel = rel.shape[1]
    ours_metrics = ["recall@5", "recall@10", "precision@5", "mrr", "map", "ndcg@10", "hit_rate@5"]
    qids = [f"q{i}" for i in range(n_q)]
    n_docs = int(max(run.max(), rel.max())) + 1

    def ours_end_to_end():
        labels = document_labels(qids, np.repeat(np.arange(n_q), n_rel), rel.ravel(), grades.ravel(), n_docs)
        return evaluate(run, labels, ours_metrics).mean()

    labels = document_labels(qids, np.repeat(np.arange(n_q), n_rel), rel.ravel(), grades.ravel(), n_docs)
    t_ours = best_of(ours_end_to_end)
    t_ours_score = best_of(lambda: evaluate(run, labels, ours_metrics).mean())

    qrels = {qids[i]: {f"d{d}": int(g) for d, g in zip(rel[i], grades[i])} for i in range(n_q)}
    run_dict = {qids[i]: {f"d{d}": float(100 - r) for r, d in enumerate(run[i])} for i in range(n_q)}

    import pytrec_eval

    trec_measures = {"recall_5", "recall_10", "P_5", "recip_rank", "map", "ndcg_cut_10", "success_5"}

    def pytrec():
        ev = pytrec_eval.RelevanceEvaluator(qrels, trec_measures)
        res = ev.evaluate(run_dict)
        return {m: np.mean([v[m] for v in res.values()]) for m in trec_measures}

    t_pytrec = best_of(pytrec)
    ref, mine = pytrec(), ours_end_to_end()
    agree = abs(ref["ndcg_cut_10"] - mine["ndcg@10"]) < 1e-9 and abs(ref["map"] - mine["map"]) < 1e-9

    result = {
        "questions": n_q,
        "ours_s": t_ours,
        "ours_score_only_s": t_ours_score,
        "pytrec_eval_s": t_pytrec,
        "metrics_vs_pytrec_eval": t_pytrec / t_ours,
        "agree_with_pytrec_eval": bool(agree),
    }
    result |= bench_public_score(qrels, run_dict, ours_metrics, trec_measures, t_pytrec)
    try:
        from ranx import Qrels, Run
        from ranx import evaluate as ranx_evaluate

        ranx_metrics = ["recall@5", "recall@10", "precision@5", "mrr", "map", "ndcg@10", "hit_rate@5"]
        ranx_evaluate(Qrels(qrels), Run(run_dict), ranx_metrics)  # numba compiles on first call
        t_ranx = best_of(lambda: ranx_evaluate(Qrels(qrels), Run(run_dict), ranx_metrics), repeat=3)
        result |= {"ranx_s": t_ranx, "metrics_vs_ranx": t_ranx / t_ours}
    except ImportError:
        pass
    print(
        f"metrics, {n_q} questions x 100 results, 7 measures: ours {t_ours * 1000:.1f} ms end to end "
        f"({t_ours_score * 1000:.1f} ms scoring only), pytrec_eval {t_pytrec * 1000:.0f} ms "
        f"-> {result['metrics_vs_pytrec_eval']:.1f}x faster"
        + (
            f"; ranx {result['ranx_s'] * 1000:.0f} ms -> {result['metrics_vs_ranx']:.1f}x"
            if "ranx_s" in result
            else ""
        )
        + f"; values agree with pytrec_eval: {agree}"
    )
    return result


def timed(fn, repeat: int = 5) -> tuple[float, float, object]:
    """Median wall and median CPU seconds of ``repeat`` calls, and the last result."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), out


def timed_pair(ours, theirs, repeat: int = 5) -> tuple[tuple, tuple]:
    """:func:`timed` for two sides, their runs alternated (ours, theirs, ours, ...) so that a machine
    getting slower or faster during the comparison moves both medians alike."""
    runs: dict[str, list] = {"ours": [], "theirs": []}
    for _ in range(repeat):
        for side, fn in (("ours", ours), ("theirs", theirs)):
            runs[side].append(timed(fn, 1))
    return tuple(
        (statistics.median(r[0] for r in runs[s]), statistics.median(r[1] for r in runs[s]), runs[s][-1][2])
        for s in ("ours", "theirs")
    )


def bench_public_score(
    qrels: dict, run: dict, metrics: list[str], trec_measures: set[str], t_pytrec: float
) -> dict:
    """``sweep.score`` against pytrec_eval on the same input, dicts and TREC files, both sides ending in
    per-question values for the same 7 measures, which must be identical (checked here)."""
    import tempfile

    import pytrec_eval

    from sweep import score

    names = dict(zip(sorted(trec_measures), sorted(metrics, key=_trec_name)))

    def pytrec_dicts():
        return pytrec_eval.RelevanceEvaluator(qrels, trec_measures).evaluate(run)

    def differs(ours, theirs) -> float:
        ids = ours.question_ids
        return max(
            float(np.abs(ours.values[m] - np.array([theirs[q][t] for q in ids])).max())
            for t, m in names.items()
        )

    (dict_wall, dict_cpu, ours), (ref_wall, ref_cpu, ref) = timed_pair(
        lambda: score(qrels, run, metrics), pytrec_dicts
    )
    with tempfile.TemporaryDirectory() as tmp:
        q_path, r_path = Path(tmp) / "qrels.txt", Path(tmp) / "run.txt"
        q_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
        r_path.write_text(
            "".join(f"{q} Q0 {d} 0 {s!r} x\n" for q, docs in run.items() for d, s in docs.items())
        )

        def pytrec_files():
            with open(q_path) as fq, open(r_path) as fr:
                q, r = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
            return pytrec_eval.RelevanceEvaluator(q, trec_measures).evaluate(r)

        (file_wall, file_cpu, ours_f), (ref_f_wall, ref_f_cpu, ref_f) = timed_pair(
            lambda: score(q_path, r_path, metrics), pytrec_files
        )
    out = {
        "score_dicts_s": dict_wall,
        "score_dicts_cpu_s": dict_cpu,
        "pytrec_eval_dicts_s": ref_wall,
        "pytrec_eval_dicts_cpu_s": ref_cpu,
        "metrics_dicts_vs_pytrec_eval": ref_wall / dict_wall,
        "score_files_s": file_wall,
        "score_files_cpu_s": file_cpu,
        "pytrec_eval_files_s": ref_f_wall,
        "pytrec_eval_files_cpu_s": ref_f_cpu,
        "metrics_files_vs_pytrec_eval": ref_f_wall / file_wall,
        "score_max_abs_difference": max(differs(ours, ref), differs(ours_f, ref_f)),
    }
    print(
        f"sweep.score from dicts {dict_wall * 1000:.0f} ms wall / {dict_cpu * 1000:.0f} ms CPU vs pytrec_eval "
        f"{ref_wall * 1000:.0f} / {ref_cpu * 1000:.0f} ms -> {out['metrics_dicts_vs_pytrec_eval']:.2f}x; from TREC "
        f"files {file_wall * 1000:.0f} / {file_cpu * 1000:.0f} ms vs {ref_f_wall * 1000:.0f} / "
        f"{ref_f_cpu * 1000:.0f} ms -> {out['metrics_files_vs_pytrec_eval']:.2f}x; per-question values differ by "
        f"at most {out['score_max_abs_difference']:.1e} (medians of 5)"
    )
    return out


def _trec_name(metric: str) -> str:
    """trec_eval's name of one of our measures, to pair them up: recall@5 -> recall_5, mrr -> recip_rank."""
    name, _, k = metric.partition("@")
    base = {
        "recall": "recall",
        "precision": "P",
        "mrr": "recip_rank",
        "map": "map",
        "ndcg": "ndcg_cut",
        "hit_rate": "success",
    }[name]
    return f"{base}_{k}" if k else base


def scifact_texts():
    from sweep.data import load_beir

    ds = load_beir(SHARED / "scifact", "test")
    return [f"{d.title} {d.text}" for d in ds.documents], [q.text for q in ds.questions]


def bench_bm25() -> dict:
    """BM25's whole path on both sides from the same raw SciFact texts to the same output, the top 100
    (ids and scores) of 300 questions: tokenise and stem (the same regex, stop words and Snowball
    stemmer on both), index, query. bm25s's "robertson" scores are ours / (k1 + 1); checked equal."""
    import bm25s
    import Stemmer

    from sweep.config.schema import BM25Config
    from sweep.retrieval.bm25 import ENGLISH_STOPWORDS, Analyzer, BM25Index, RankBM25

    docs, queries = scifact_texts()
    config = BM25Config()
    stemmer = Stemmer.Stemmer(config.stemming)
    stemmer.maxCacheSize = 0  # as ours: both stem each distinct word once, PyStemmer's cache only costs
    tokenize = dict(token_pattern=r"(?u)\w+", stopwords=sorted(ENGLISH_STOPWORDS), show_progress=False)

    def ours():
        return BM25Index(docs, config).search(queries, 100)

    def theirs():
        index = bm25s.BM25(k1=config.k1, b=config.b, method="robertson")
        index.index(bm25s.tokenize(docs, stemmer=stemmer.stemWords, **tokenize), show_progress=False)
        return index.retrieve(
            bm25s.tokenize(queries, stemmer=stemmer.stemWords, **tokenize),
            k=100,
            show_progress=False,
            n_threads=1,
        )

    counts = Analyzer(config).counts(docs)
    (ours_wall, ours_cpu, mine), (theirs_wall, theirs_cpu, (ids, scores)) = timed_pair(ours, theirs, 9)
    warm_wall, warm_cpu, _ = timed(
        lambda: BM25Index(docs, config, counts=lambda t: counts).search(queries, 100)
    )
    answered = np.isfinite(mine.scores) & (mine.scores > 0)
    theirs_scaled = scores * (config.k1 + 1)
    equal = bool(
        np.allclose(np.where(answered, mine.scores, 0), np.where(answered, theirs_scaled, 0), rtol=1e-5)
    )
    t = time.perf_counter()
    analyze = Analyzer(config)
    RankBM25([analyze(d) for d in docs], config).scores([analyze(q) for q in queries])
    rank_bm25_s = time.perf_counter() - t
    print(
        f"bm25 whole path (tokenise, index, 300 SciFact questions, top 100), median of 9 alternated: ours "
        f"{ours_wall:.3f} s wall / {ours_cpu:.3f} s CPU, bm25s {theirs_wall:.3f} s / {theirs_cpu:.3f} s "
        f"-> {theirs_wall / ours_wall:.2f}x; with the token cache warm (a sweep's next k1, b) "
        f"{warm_wall:.3f} s -> {theirs_wall / warm_wall:.1f}x; top-100 scores equal: {equal}; "
        f"rank_bm25 (once) {rank_bm25_s:.1f} s"
    )
    return {
        "bm25_whole_vs_bm25s": theirs_wall / ours_wall,
        "bm25_whole_cpu_vs_bm25s": theirs_cpu / ours_cpu,
        "bm25_warm_tokens_vs_bm25s": theirs_wall / warm_wall,
        "bm25_scores_equal_bm25s": equal,
        "bm25_vs_rank_bm25": rank_bm25_s / ours_wall,
    }


def bench_encode(repeats: int = 3) -> dict:
    """Our cached encoder against a bare ``SentenceTransformer.encode`` of the same new texts (fresh
    cache each repeat; medians), then ``encode_2_workers_over_1``."""
    import tempfile

    from sentence_transformers import SentenceTransformer

    from sweep.config.schema import DenseConfig
    from sweep.models import resolve_model
    from sweep.retrieval import Encoder

    docs, _ = scifact_texts()
    texts = docs[:192]
    bare = SentenceTransformer(resolve_model("minilm-l6"), device="cpu")
    bare.encode(texts[:8])  # warm up
    t_bare, c_bare, _ = timed(
        lambda: bare.encode(texts[8:], batch_size=64, normalize_embeddings=True), repeats
    )
    ours, cached = [], []
    for _ in range(repeats):  # a fresh cache each time: every text is new to it
        with tempfile.TemporaryDirectory() as cache:
            encoder = Encoder(DenseConfig(), cache)
            encoder.encode(texts[:8])  # loads the model; these 8 come from the cache below
            ours.append(timed(lambda: encoder.encode(texts[8:] + texts[:8]), 1)[:2])
            cached.append(timed(lambda: encoder.encode(texts), 1)[0])
    t_ours, c_ours = (statistics.median(x) for x in zip(*ours))
    ratio, per_s = t_ours / t_bare, (len(texts) - 8) / t_ours
    print(
        f"encode 184 new SciFact abstracts (MiniLM, CPU, median of {repeats}): bare SentenceTransformer "
        f"{t_bare:.1f} s wall / {c_bare:.1f} s CPU, ours {t_ours:.1f} s / {c_ours:.1f} s (ratio {ratio:.2f}, "
        f"{per_s:.0f} texts/s), all cached {statistics.median(cached) * 1000:.0f} ms"
    )
    return {"encode_vs_bare": ratio, "encode_texts_per_s": per_s, **bench_encode_workers()}


ENCODE_CHILD = """
import os, sys, time
core, cache, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
os.sched_setaffinity(0, {core})  # one core per worker: the figure is about sharing, not threads
import torch
torch.set_num_threads(1)
sys.path[:0] = sys.argv[4:6]
from bench import scifact_texts
from sweep.config.schema import DenseConfig
from sweep.retrieval import Encoder
encoder = Encoder(DenseConfig(), cache)
encoder.model()  # loaded before the clock starts
texts = scifact_texts()[0][:n]
print("ready", flush=True)
sys.stdin.readline()  # the parent starts every worker at once
t, cpu = time.perf_counter(), time.process_time()
encoder.encode(texts, progress="encode")
print(time.perf_counter() - t, time.process_time() - cpu, encoder.stats.encoded, flush=True)
"""


def bench_encode_workers(n: int = 1024, repeats: int = 3) -> dict:
    """The same ``n`` new texts encoded by 1 and by 2 worker processes sharing one fresh ``cache_dir``
    (shard claims), each held to one core and one torch thread; wall time from the common start to the
    last worker's end, model loading excluded. Medians of ``repeats``; each text is encoded once in all."""
    import os
    import subprocess
    import tempfile

    cores = sorted(os.sched_getaffinity(0))
    walls: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(repeats):
        for workers in (1, 2):
            with tempfile.TemporaryDirectory() as cache:
                procs = [
                    subprocess.Popen(
                        [sys.executable, "-c", ENCODE_CHILD, str(cores[i % len(cores)]), cache, str(n)]
                        + [str(ROOT / "scripts"), str(ROOT / "src")],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        text=True,
                    )
                    for i in range(workers)
                ]
                for proc in procs:
                    assert proc.stdout.readline().strip() == "ready"
                t = time.perf_counter()
                for proc in procs:
                    proc.stdin.write("go\n")
                    proc.stdin.flush()
                encoded = sum(int(proc.stdout.readline().split()[2]) for proc in procs)
                walls[workers].append(time.perf_counter() - t)
                for proc in procs:
                    proc.wait()
                if encoded != n:
                    raise RuntimeError(f"{workers} workers encoded {encoded} texts in all, not {n}")
    one, two = statistics.median(walls[1]), statistics.median(walls[2])
    print(
        f"encode {n} new texts, each worker on one core (median of {repeats}): 1 worker {one:.1f} s "
        f"({n / one:.0f} texts/s), 2 workers sharing the cache {two:.1f} s ({n / two:.0f} texts/s): "
        f"{one / two:.2f}x; every text encoded once in all"
    )
    return {"encode_2_workers_over_1": one / two}


def bench_eval_cold_warm() -> dict:
    """`sweep eval` twice on a 600-document SciFact slice: cold (empty cache), then warm (new process state)."""
    import tempfile

    import yaml

    from sweep.config.load import load_config
    from sweep.data import load_beir
    from sweep.pipeline.runner import Pipeline

    full = load_beir(SHARED / "scifact", "test")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "d").mkdir()
        docs = full.documents[:600]
        ids = {d.id for d in docs}
        qs = [q for q in full.questions if all(e.doc_id in ids for e in q.evidence)]
        (tmp / "d" / "corpus.jsonl").write_text(
            "\n".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) for d in docs)
        )
        (tmp / "d" / "questions.jsonl").write_text(
            "\n".join(
                json.dumps(
                    {
                        "id": q.id,
                        "text": q.text,
                        "evidence": [{"doc_id": e.doc_id, "grade": 1} for e in q.evidence],
                    }
                )
                for q in qs
            )
        )
        cfg = {
            "dataset": {"loader": "native", "path": str(tmp / "d")},
            "retrieval": {"mode": "hybrid"},
            "cache_dir": str(tmp / "c"),
        }
        (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
        config = load_config(tmp / "c.yaml")
        t = time.perf_counter()
        Pipeline(config.cache_dir, progress=False).run(config)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        warm_result = Pipeline(config.cache_dir, progress=False).run(config)
        warm = time.perf_counter() - t
    print(
        f"sweep eval, 600 SciFact documents, hybrid: cold {cold:.1f} s, warm {warm:.2f} s "
        f"({cold / warm:.0f}x), texts encoded on the warm run: {warm_result.counters['texts_encoded']}"
    )
    return {"eval_cold_over_warm": cold / warm}


def bench_warm_trial() -> dict:
    """A sweep trial that changes only fusion or k on SciFact's 300 questions, caches hot."""
    from sweep.config.load import load_config
    from sweep.pipeline.runner import Pipeline

    path = ROOT / "configs" / "scifact-dense.yaml"
    base = ["retrieval.mode=hybrid", "retrieval.bm25.k1=0.9", "retrieval.bm25.b=0.4"]
    pipeline = Pipeline(ROOT / ".cache" / "rag-sweep", progress=False)
    pipeline.run(load_config(path, base))  # cold: encodes SciFact once (minutes), then cached for good
    variants = [
        [f"retrieval.fusion.alpha={a / 20}", f"retrieval.top_k={k}"] for a in range(20) for k in (10, 100)
    ]
    configs = [load_config(path, base + v) for v in variants]
    times = []
    for config in configs:
        t = time.perf_counter()
        pipeline.run(config, ["ndcg@10"])
        times.append(time.perf_counter() - t)
    rrf = load_config(path, base + ["retrieval.fusion.method=rrf"])
    t = time.perf_counter()
    pipeline.run(rrf)
    t_rrf = time.perf_counter() - t
    warm = statistics.median(times) * 1000
    print(
        f"warm trial (fusion or k changed, SciFact 300 questions): median {warm:.1f} ms over {len(times)} trials, "
        f"rrf {t_rrf * 1000:.1f} ms"
    )
    return {"warm_trial_ms": warm}


def bench_sweep() -> dict:
    """A small sweep from a cold cache: its wall time against the time spent encoding unique texts."""
    import tempfile

    from sweep.tuning.sweep import Sweep

    with tempfile.TemporaryDirectory() as tmp:
        overrides = [
            f"cache_dir={tmp}/cache",
            "search.trials=12",
            "retrieval.dense.model=minilm-l6",
            "search.space={chunking.size: {categorical: [100, 200]}, retrieval.mode: {categorical: [hybrid, dense]},"
            " retrieval.fusion.alpha: {float: [0.0, 1.0], step: 0.1}}",
        ]
        sweep = Sweep(ROOT / "configs" / "hybrid.yaml", overrides, runs_dir=Path(tmp) / "runs", quiet=True)
        t = time.perf_counter()
        sweep.run()
        wall = time.perf_counter() - t
        encode = sum(e.stats.seconds for e in sweep.pipeline._encoders.values())
        encoded = sum(e.stats.encoded for e in sweep.pipeline._encoders.values())
        trials = sweep.work_seconds
        import optuna

        first = optuna.load_study(study_name="hybrid", storage=sweep.storage).trials[0].user_attrs["seconds"]
    print(
        f"sweep, 12 trials on the bundled set from a cold cache: {wall:.1f} s in all, {trials:.1f} s of trials; "
        f"{encoded} unique texts encoded in {encode:.1f} s; trials / encoding = {trials / encode:.2f}, "
        f"whole run (held-out evaluation, report, plots) / encoding = {wall / encode:.2f}; cold first trial {first:.1f} s"
    )
    return {
        "sweep_over_unique_encode": trials / encode,
        "sweep_whole_over_unique_encode": wall / encode,
        "cold_trial_seconds": first,
    }


def bench_workers() -> dict:
    """Trials per minute with 1 and 2 worker processes (BM25 trials on the bundled set, SQLite stores)."""
    import subprocess
    import tempfile

    rates = {}
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                "-m",
                "sweep",
                str(ROOT / "configs" / "hybrid.yaml"),
                "--trials",
                "40",
                "--workers",
                str(workers),
                "--runs-dir",
                f"{tmp}/runs",
                f"cache_dir={tmp}/cache",
                "retrieval.mode=bm25",
                "search.holdout.fraction=0",
                "dataset.split=tune",
                "search.space={retrieval.bm25.k1: {float: [0.5, 1.5], step: 0.05}, retrieval.bm25.b: {float: [0.2, 1.0], step: 0.05},"
                " retrieval.top_k: {categorical: [10, 20]}}",
            ]
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp)
            rates[workers] = 40 / (time.perf_counter() - t) * 60
    print(
        f"trials per minute (40 BM25 trials, whole command): 1 worker {rates[1]:.0f}, 2 workers {rates[2]:.0f} "
        f"({rates[2] / rates[1]:.2f}x)"
    )
    return {"trials_per_min_1_worker": rates[1], "trials_per_min_2_workers": rates[2]}


def bench_sweep_trial(trials: int = 60) -> dict:
    """Cached BM25 trials inside a sweep, one worker, the embedded stores: the whole loop per trial
    (Optuna ask/tell, duplicate and surplus checks, MLflow run, metrics and artifacts, progress line).

    Measured as the median gap between consecutive trials' starts (Optuna's own timestamps), after
    the first 5; the pipeline's share is each trial's own evaluation time (``seconds``)."""
    import tempfile

    import optuna

    from sweep.tuning.sweep import Sweep

    with tempfile.TemporaryDirectory() as tmp:
        overrides = [
            f"cache_dir={tmp}/cache",
            f"search.trials={trials}",
            "retrieval.mode=bm25",
            "search.holdout.fraction=0",
            "dataset.split=tune",
            "search.space={retrieval.bm25.k1: {float: [0.5, 1.5], step: 0.05}, retrieval.bm25.b: {float: [0.2, 1.0], step: 0.05},"
            " retrieval.top_k: {categorical: [10, 20]}}",
        ]
        sweep = Sweep(ROOT / "configs" / "hybrid.yaml", overrides, runs_dir=Path(tmp) / "runs", quiet=True)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = time.process_time()
        sweep.run()
        cpu = time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the MLflow writer, reaped when the sweep ends
        writer_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
        done = sorted(
            optuna.load_study(study_name="hybrid", storage=sweep.storage).trials, key=lambda t: t.number
        )
    gaps = [(b.datetime_start - a.datetime_start).total_seconds() * 1000 for a, b in zip(done[5:], done[6:])]
    evaluation = statistics.median(t.user_attrs.get("seconds", 0.0) for t in done[5:]) * 1000
    trial_ms = statistics.median(gaps)
    print(
        f"cached BM25 trial inside a sweep ({len(done)} trials, bundled set, SQLite stores): median "
        f"{trial_ms:.0f} ms wall per trial, of which evaluation {evaluation:.0f} ms; "
        f"{cpu / len(done) * 1000:.0f} ms CPU per trial over the whole command, and {writer_cpu / len(done) * 1000:.0f} "
        f"ms in the MLflow writer process beside it; {60_000 / trial_ms:.0f} warm trials per minute"
    )
    return {
        "sweep_trial_ms": trial_ms,
        "trials_per_min_warm": 60_000 / trial_ms,
        "sweep_trial_eval_ms": evaluation,
        "sweep_trial_cpu_ms": cpu / len(done) * 1000,
        "sweep_trial_writer_cpu_ms": writer_cpu / len(done) * 1000,
    }


SCALE_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[3])
from sweep.config.load import load_config
from sweep.pipeline.runner import Pipeline
config = load_config(sys.argv[1])
t = time.perf_counter()
result = Pipeline(config.cache_dir, progress=False).run(config, ["recall@100", "ndcg@10"])
seconds = time.perf_counter() - t
# VmHWM, not ru_maxrss: rusage keeps the forking parent's peak from before exec
peak_kb = next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(seconds, result.scores.mean()["ndcg@10"], peak_kb)
"""


def bench_scale(factors: tuple[int, ...] = (1, 4, 16)) -> dict:
    """Cold BM25 `sweep eval` (load, chunk, tokenise, index, query SciFact's 300 questions, score) on
    SciFact grown to 4x and 16x its documents by resampling (copies of random abstracts under new
    ids, so every question's evidence stays in). Each size runs in a fresh process with an empty
    cache; its time excludes interpreter start-up, its peak RSS is that process's own (VmHWM)."""
    import subprocess
    import tempfile

    import yaml

    from sweep.data import load_beir

    full = load_beir(SHARED / "scifact", "test")
    rng = np.random.default_rng(0)
    seconds, rss = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        questions = "\n".join(
            json.dumps(
                {
                    "id": q.id,
                    "text": q.text,
                    "evidence": [{"doc_id": e.doc_id, "grade": 1} for e in q.evidence],
                }
            )
            for q in full.questions
        )
        for f in factors:
            data = tmp / f"x{f}"
            data.mkdir()
            extra = rng.integers(0, len(full.documents), (f - 1) * len(full.documents))
            with open(data / "corpus.jsonl", "w") as out:
                for d in full.documents:
                    out.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n")
                for i, j in enumerate(extra):
                    d = full.documents[j]
                    out.write(json.dumps({"id": f"r{i}", "title": d.title, "text": d.text}) + "\n")
            (data / "questions.jsonl").write_text(questions)
            cfg = {
                "dataset": {"loader": "native", "path": str(data)},
                "retrieval": {"mode": "bm25", "top_k": 100},
                "cache_dir": str(tmp / f"cache{f}"),
            }
            (data / "c.yaml").write_text(yaml.safe_dump(cfg))
            proc = subprocess.Popen(
                [sys.executable, "-c", SCALE_CHILD, str(data / "c.yaml"), "", str(ROOT / "src")],
                stdout=subprocess.PIPE,
                text=True,
            )
            out = proc.stdout.read()
            if proc.wait() != 0:
                raise RuntimeError(f"scale {f}x failed: {out}")
            seconds[f], rss[f] = float(out.split()[0]), int(out.split()[2]) / 1024
    slope = np.polyfit(np.log(list(seconds)), np.log(list(seconds.values())), 1)[0]
    print(
        "BM25 sweep eval, SciFact resampled, cold: "
        + ", ".join(f"{f}x {seconds[f]:.1f} s / {rss[f]:.0f} MB peak" for f in factors)
        + f"; time grows as size^{slope:.2f}"
    )
    return {"scale_exponent": float(slope), f"peak_rss_mb_{factors[-1]}x": rss[factors[-1]]}


def bench_bootstrap(n_q: int = 50_000) -> dict:
    """Peak memory (tracemalloc: NumPy's arrays are traced) of one bootstrap interval and one paired
    randomisation test at 50,000 questions, 10,000 resamples each, and their times."""
    import tracemalloc

    from sweep.analysis.significance import bootstrap_ci, paired_randomization

    rng = np.random.default_rng(0)
    a, b = rng.random(n_q), rng.random(n_q)
    tracemalloc.start()
    wall, cpu, _ = timed(lambda: (bootstrap_ci(b - a), paired_randomization(a, b)), repeat=3)
    peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    one_shot_mb = 10_000 * n_q * (8 + 8) / 2**20  # a whole (resamples, questions) index and value matrix
    print(
        f"bootstrap interval + paired randomisation test, {n_q:,} questions x 10,000 resamples: "
        f"peak {peak_mb:.0f} MB extra (one whole draw would need {one_shot_mb:,.0f} MB); "
        f"median {wall:.1f} s wall, {cpu:.1f} s CPU of 3"
    )
    return {"bootstrap_mb_50k_questions": peak_mb, "bootstrap_50k_s": wall}


SECTIONS = {
    "bootstrap": lambda a: bench_bootstrap(),
    "trial": lambda a: bench_warm_trial(),
    "sweep_trial": lambda a: bench_sweep_trial(),
    "scale": lambda a: bench_scale(),
    "metrics": lambda a: bench_metrics(a.questions),
    "bm25": lambda a: bench_bm25(),
    "encode": lambda a: bench_encode(),
    "eval": lambda a: bench_eval_cold_warm(),
    "sweep": lambda a: bench_sweep(),
    "workers": lambda a: bench_workers(),
    "inference": lambda a: __import__("bench_inference").bench_inference(),
    "screen": lambda a: __import__("bench_screen").bench_screen(),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help="comma-separated sections: " + ", ".join(SECTIONS)
    )
    parser.add_argument("--questions", type=int, default=10_000)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    summary: dict = {}
    for name in args.only.split(","):
        summary[name] = SECTIONS[name](args)
    import resource

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak memory: this process {peak_mb:.0f} MB, largest child process {children_mb:.0f} MB")
    headline = {  # figures and ratios; plain durations (``..._s``) stay in the lines above
        k: v
        for section in summary.values()
        for k, v in section.items()
        if not k.endswith("_s") or k.endswith("_per_s")
    }
    headline["peak_rss_mb"] = peak_mb
    print(json.dumps(headline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
