"""Full-dataset reproductions of published numbers (minutes; the tests run a small slice).

    .venv/bin/python scripts/reproduce.py [scifact] [alpha] [rm3] [chroma]

* scifact: BM25 and all-MiniLM-L6-v2 on all of SciFact's test split, against
  Anserini / the BEIR paper and MTEB's published run.
* alpha: NDCG@10 of the hybrid over alpha = 0, 0.1, ..., 1 for each fusion (linear with min-max,
  z-score or DBSF normalisation; weighted RRF, equal to RRF at 0.5).
* rm3: BM25 with and without RM3 pseudo-relevance feedback on SciFact.
* chroma: Chroma's chunking evaluation, three chunkers, against their table.

Embeddings land in the shared cache, so a second run takes seconds.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sweep.config.load import load_config  # noqa: E402
from sweep.pipeline.runner import Pipeline  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
CHROMA_CASES = [
    ("TokenText", "fixed", 250, 125),
    ("TokenText", "fixed", 200, 0),
    ("Recursive", "recursive", 200, 0),
]


def check(name: str, value: float, lo: float, hi: float) -> bool:
    ok = lo <= value <= hi
    print(f"  {name:<38} {value:8.4f}   target [{lo:.4f}, {hi:.4f}]   {'ok' if ok else 'MISS'}")
    return ok


def scifact(pipeline: Pipeline) -> bool:
    ref = json.loads((SHARED / "scifact" / "reference_numbers.json").read_text())["dense_all-MiniLM-L6-v2"]
    print("SciFact test (300 questions, 5,183 documents)")
    t = time.perf_counter()
    bm25 = pipeline.run(load_config(ROOT / "configs" / "scifact-bm25.yaml")).scores.mean()
    print(f"  BM25 in {time.perf_counter() - t:.1f}s; Anserini flat 0.6789, BEIR paper 0.665")
    ok = check("BM25 ndcg@10", bm25["ndcg@10"], 0.655, 0.69)
    print(f"  {'BM25 recall@100':<38} {bm25['recall@100']:8.4f}   (Anserini flat 0.9253)")
    t = time.perf_counter()
    dense = pipeline.run(load_config(ROOT / "configs" / "scifact-dense.yaml")).scores.mean()
    print(
        f"  all-MiniLM-L6-v2 in {time.perf_counter() - t:.1f}s; MTEB {ref['ndcg@10']} / {ref['recall@100']}"
    )
    ok &= check("MiniLM ndcg@10", dense["ndcg@10"], ref["ndcg@10"] - 0.005, ref["ndcg@10"] + 0.005)
    ok &= check("MiniLM recall@100", dense["recall@100"], ref["recall@100"] - 0.01, ref["recall@100"] + 0.01)
    for k in ("ndcg@1", "ndcg@5", "recall@10", "map@10"):
        if k in ref and k in dense:
            print(f"  {'MiniLM ' + k:<38} {dense[k]:8.4f}   (MTEB {ref[k]})")
    return ok


FUSIONS = [  # (row label, overrides): each over alpha, the dense weight
    ("linear, min-max", ["retrieval.fusion.method=linear", "retrieval.fusion.normalization=minmax"]),
    ("linear, z-score", ["retrieval.fusion.method=linear", "retrieval.fusion.normalization=zscore"]),
    ("linear, DBSF", ["retrieval.fusion.method=linear", "retrieval.fusion.normalization=dbsf"]),
    ("weighted RRF (k 60)", ["retrieval.fusion.method=weighted_rrf"]),
]


def alpha(pipeline: Pipeline) -> bool:
    """The hybrid over alpha for each fusion: every row re-uses the same two cached first stages."""
    print("SciFact hybrid (BM25 + all-MiniLM-L6-v2, 100 candidates each) by fusion and alpha (0 = BM25)")
    base = ROOT / "configs" / "scifact-dense.yaml"
    alphas = [i / 10 for i in range(11)]
    print("  | NDCG@10 | " + " | ".join(f"{a:.1f}" for a in alphas) + " |")
    print("  |---|" + "---|" * len(alphas))
    recall = {}
    for label, fusion in FUSIONS:
        cells = []
        for a in alphas:
            overrides = ["retrieval.mode=hybrid", f"retrieval.fusion.alpha={a}", *fusion]
            m = pipeline.run(load_config(base, overrides)).scores.mean()
            cells.append(m["ndcg@10"])
            recall[(label, a)] = m["recall@100"]
        best = max(cells)
        shown = [f"**{v:.4f}**" if v == best else f"{v:.4f}" for v in cells]
        print(f"  | {label} | " + " | ".join(shown) + " |")
    print(
        "  | recall@100, min-max | " + " | ".join(f"{recall[(FUSIONS[0][0], a)]:.4f}" for a in alphas) + " |"
    )
    return True


def rm3(pipeline: Pipeline) -> bool:
    print("SciFact test, BM25 over whole documents, with and without RM3 (10 docs, 10 terms, weight 0.5)")
    path = ROOT / "configs" / "scifact-rm3.yaml"
    for name, overrides in (("BM25", ["retrieval.query.transform=none"]), ("BM25 + RM3", [])):
        t = time.perf_counter()
        m = pipeline.run(load_config(path, overrides)).scores.mean()
        print(
            f"  {name:<12} ndcg@10 {m['ndcg@10']:.4f}  recall@100 {m['recall@100']:.4f}  ({time.perf_counter() - t:.1f}s)"
        )
    return True


def chroma(pipeline: Pipeline) -> bool:
    with open(SHARED / "chroma-chunking" / "reference" / "chroma_report_results.csv") as fh:
        table = [
            r for r in csv.DictReader(fh) if r["table"] == "main" and r["embedding"] == "all-MiniLM-L6-v2"
        ]
    print("Chroma chunking evaluation, all-MiniLM-L6-v2, top 5, all corpora in one index (cl100k tokens)")
    ok = True
    for chunker, strategy, size, overlap in CHROMA_CASES:
        ref = next(
            r
            for r in table
            if r["chunker"] == chunker
            and int(r["chunk_size_tokens"]) == size
            and int(r["overlap_tokens"]) == overlap
        )
        overrides = [f"chunking.strategy={strategy}", f"chunking.size={size}", f"chunking.overlap={overlap}"]
        t = time.perf_counter()
        result = pipeline.run(load_config(ROOT / "configs" / "chroma-chunking.yaml", overrides))
        m = result.chunk_scores.mean()
        print(
            f"  {chunker} {size}/{overlap}: {len(pipeline.prepare(result.config).chunks)} chunks, "
            f"{time.perf_counter() - t:.0f}s"
        )
        for ours, theirs in (
            ("char_recall@5", "recall_mean"),
            ("char_iou@5", "iou_mean"),
            ("char_precision@5", "precision_mean"),
        ):
            value, target = 100 * m[ours], float(ref[theirs])
            if ours == "char_precision@5":
                print(f"  {ours:<38} {value:8.2f}   (published {target})")
            else:
                ok &= check(f"{ours} (x100)", value, target - 2.5, target + 2.5)
    return ok


def main() -> int:
    parts = sys.argv[1:] or ["scifact", "alpha", "rm3", "chroma"]
    pipeline = Pipeline(ROOT / ".cache" / "rag-sweep")
    results = {
        p: {"scifact": scifact, "alpha": alpha, "rm3": rm3, "chroma": chroma}[p](pipeline) for p in parts
    }
    print(json.dumps(results))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
