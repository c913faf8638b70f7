"""Cold BM25 ``sweep eval`` on SciFact grown 4x and 16x: time and peak memory."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import ROOT, SHARED

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
