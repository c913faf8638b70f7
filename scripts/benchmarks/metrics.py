"""Metric kernels against pytrec_eval and ranx, and ``sweep.score`` on dicts and TREC files."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import timed, timed_pair


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
    t_ours = timed(ours_end_to_end)[0]
    t_ours_score = timed(lambda: evaluate(run, labels, ours_metrics).mean())[0]

    qrels = {qids[i]: {f"d{d}": int(g) for d, g in zip(rel[i], grades[i])} for i in range(n_q)}
    run_dict = {qids[i]: {f"d{d}": float(100 - r) for r, d in enumerate(run[i])} for i in range(n_q)}

    import pytrec_eval

    trec_measures = {"recall_5", "recall_10", "P_5", "recip_rank", "map", "ndcg_cut_10", "success_5"}

    def pytrec():
        ev = pytrec_eval.RelevanceEvaluator(qrels, trec_measures)
        res = ev.evaluate(run_dict)
        return {m: np.mean([v[m] for v in res.values()]) for m in trec_measures}

    t_pytrec = timed(pytrec)[0]
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
        t_ranx = timed(lambda: ranx_evaluate(Qrels(qrels), Run(run_dict), ranx_metrics), repeat=3)[0]
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


def bench_public_score(
    qrels: dict, run: dict, metrics: list[str], trec_measures: set[str], t_pytrec: float
) -> dict:
    """``sweep.score`` against pytrec_eval on the same input, dicts and TREC files, both sides ending in
    per-question values for the same 7 measures, which must be identical (checked here)."""

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
