"""The inference options side by side: speed against bare sentence-transformers on torch, quality on SciFact.

Speed: the same 400 SciFact abstracts (or 64 for the reranking model) through each option's one
embedding call (``sweep.retrieval.embedding.embed``, what the encoder and Ray's actors run) and through a
bare ``SentenceTransformer.encode`` on torch, same batch size and normalisation, float32 vectors out on
both sides; options and baseline take turns, each round once, so drift moves all medians alike.
Models are loaded (and exported) before any clock starts. Quality: a full ``sweep eval`` of SciFact's 300
test questions per option (vectors cached in ``.cache/bench-inference`` between bench runs: quality
does not depend on when they were made). The reranking model is the bundled one (mpnet-base as a
bi-encoder over BM25's top 10, first 50 questions), since no cross-encoder ships offline.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.common import ROOT, scifact_texts

CACHE = str(ROOT / ".cache" / "bench-inference")
ENCODE_OPTIONS = [  # (model, backend, precision)
    ("minilm-l6", "torch", "float32"),
    ("minilm-l6", "torch", "bfloat16"),
    ("minilm-l6", "onnx", "float32"),
    ("minilm-l6", "onnx", "int8"),
    ("minilm-l6", "openvino", "float32"),
    ("minilm-l6", "openvino", "bfloat16"),
    ("minilm-l3", "torch", "float32"),
    ("minilm-l3", "openvino", "bfloat16"),
    ("minilm-l6-static", "torch", "float32"),
]
RERANK_OPTIONS = [("mpnet-base", b, p) for _, b, p in ENCODE_OPTIONS[:6]]


def round_robin(fns: dict[str, object], repeats: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each function, the functions taking turns ``repeats`` times."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            w, c = time.perf_counter(), time.process_time()
            fn()
            runs[name].append((time.perf_counter() - w, time.process_time() - c))
    return {
        n: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
        for n, rs in runs.items()
    }


def speeds(options, texts: list[str], repeats: int) -> tuple[dict, float, float]:
    """Texts per second of each option and of bare torch, plus the bare run's (wall, CPU) seconds."""
    from sentence_transformers import SentenceTransformer

    from sweep.config.schema import DenseConfig
    from sweep.models import resolve_model
    from sweep.retrieval.embedding import embed, load_sentence_transformer

    bare = SentenceTransformer(resolve_model(options[0][0]), device="cpu")
    fns = {
        "bare": lambda: bare.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    }
    for model, backend, precision in options:
        loaded = load_sentence_transformer(model, None, "cpu", precision, backend, CACHE)
        config = DenseConfig(model=model, backend=backend, precision=precision)
        loaded.encode(texts[:8])  # warm: first-call allocations and graph compilation
        fns[(model, backend, precision)] = lambda m=loaded, c=config: embed(m, texts, c)
    bare.encode(texts[:8])
    times = round_robin(fns, repeats)
    load_sentence_transformer.cache_clear()  # every option's model is held for the round robin: let go now
    return {k: len(texts) / v[0] for k, v in times.items()}, *times["bare"]


def scifact_quality(overrides: list[str]) -> dict[str, float]:
    from sweep.config.load import load_config
    from sweep.pipeline.runner import Pipeline

    config = load_config(ROOT / "configs" / overrides[0], [*overrides[1:], f"cache_dir={CACHE}"])
    result = Pipeline(config.cache_dir, progress=False).run(config, ["ndcg@10", "recall@100"])
    return result.scores.mean()


def table(title: str, unit: str, options, rate: dict, quality: dict, baseline: tuple) -> None:
    print(f"{title} (bare sentence-transformers on torch: {rate['bare']:.1f} {unit}/s)")
    print(
        f"  {'model':18} {'backend':9} {'precision':9} {unit + '/s':>8} {'x torch':>7} {'NDCG@10':>8} {'R@100':>6}"
    )
    for option in options:
        q = quality[option]
        print(
            f"  {option[0]:18} {option[1]:9} {option[2]:9} {rate[option]:8.1f} {rate[option] / rate['bare']:7.2f} "
            f"{q['ndcg@10']:8.4f} {q.get('recall@100', float('nan')):6.3f}"
        )
    print(f"  bare torch: {baseline[0]:.1f} s wall, {baseline[1]:.1f} s CPU per run")


def best_vs_torch(options, rate: dict, quality: dict) -> tuple[float, tuple]:
    """The speed ratio of the fastest option whose NDCG@10 is within 0.01 of torch float32's (same model)."""
    reference = quality[options[0]]["ndcg@10"]
    keeping = [o for o in options if o[0] == options[0][0] and abs(quality[o]["ndcg@10"] - reference) <= 0.01]
    best = max(keeping, key=lambda o: rate[o])
    return rate[best] / rate["bare"], best


def bench_inference(repeats: int = 3) -> dict:
    docs, _ = scifact_texts()
    rate, *baseline = speeds(ENCODE_OPTIONS, docs[:400], repeats)
    quality = {
        o: scifact_quality(
            ["scifact-dense.yaml", f"retrieval.dense.model={o[0]}"]
            + [f"retrieval.dense.backend={o[1]}", f"retrieval.dense.precision={o[2]}"]
        )
        for o in ENCODE_OPTIONS
    }
    table("encode 400 SciFact abstracts, batch 64, CPU", "texts", ENCODE_OPTIONS, rate, quality, baseline)
    encode_ratio, encode_best = best_vs_torch(ENCODE_OPTIONS, rate, quality)

    rerank_rate, *rerank_baseline = speeds(RERANK_OPTIONS, docs[400:464], repeats)
    rerank_quality = {
        o: scifact_quality(
            ["scifact-bm25.yaml", "dataset.max_questions=50"]
            + [
                "retrieval.rerank.enabled=true",
                "retrieval.rerank.kind=bi_encoder",
                f"retrieval.rerank.model={o[0]}",
            ]
            + [
                "retrieval.rerank.depth=10",
                f"retrieval.rerank.backend={o[1]}",
                f"retrieval.rerank.precision={o[2]}",
            ]
        )
        for o in RERANK_OPTIONS
    }
    table(
        "rerank: mpnet-base re-embedding BM25's top 10 (pairs/s = candidate texts/s), SciFact's first 50 questions",
        "pairs",
        RERANK_OPTIONS,
        rerank_rate,
        rerank_quality,
        rerank_baseline,
    )
    rerank_ratio, rerank_best = best_vs_torch(RERANK_OPTIONS, rerank_rate, rerank_quality)
    print(
        f"fastest within 0.01 NDCG@10 of torch: encode {'/'.join(encode_best)} {encode_ratio:.2f}x, "
        f"rerank {'/'.join(rerank_best)} {rerank_ratio:.2f}x"
    )
    return {
        "encode_best_vs_torch": encode_ratio,
        "rerank_best_vs_torch": rerank_ratio,
        "encode_torch_texts_per_s": rate["bare"],
        "ndcg10_torch_minilm": quality[ENCODE_OPTIONS[0]]["ndcg@10"],
    }
