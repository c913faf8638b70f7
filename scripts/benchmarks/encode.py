"""The cached encoder against a bare ``SentenceTransformer.encode``; two workers sharing one cache."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.common import ROOT, scifact_texts, timed


def bench_encode(repeats: int = 3) -> dict:
    """Our cached encoder against a bare ``SentenceTransformer.encode`` of the same new texts (fresh
    cache each repeat; medians), then ``encode_2_workers_over_1``."""

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
from benchmarks.common import scifact_texts
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
