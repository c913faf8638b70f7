"""encode.engine: ray — chunk sets embedded as a Ray Data job on a real (local) Ray head, into the same cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import QUESTIONS, TOPICS, free_port, write_native_set

RAY = Path(sys.executable).parent / "ray"
# a head for this test alone: no usage report, no token file written to ~/.ray
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """A Ray head on 127.0.0.1 with two CPUs; its address (what RAY_ADDRESS holds on a cluster)."""
    port = free_port()
    env = {**os.environ, **RAY_ENV}
    start = [str(RAY), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2"]
    proc = subprocess.run(
        [*start, "--include-dashboard=false", "--disable-usage-stats"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield f"127.0.0.1:{port}"
    subprocess.run([str(RAY), "stop", "--force"], env=env, capture_output=True, timeout=120)


def corpus() -> list[dict]:
    filler = [f"Note {i}: a remark on topic {i % 13} with detail number {i * 7 % 101}." for i in range(292)]
    return [{"id": k, "text": v} for k, v in TOPICS.items()] + [
        {"id": f"f{i}", "text": t} for i, t in enumerate(filler)
    ]


def write_set(tmp_path: Path, engine: dict) -> Path:
    questions = [{"id": q, "text": t, "evidence": [{"doc_id": d, "grade": 1}]} for q, t, d in QUESTIONS]
    config = {
        "dataset": {"loader": "native", "path": "data"},
        "chunking": {"strategy": "document"},
        "retrieval": {"mode": "dense", "candidates": 20, "top_k": 5},
        "evaluation": {"ks": [1, 5]},
        "encode": engine,
        "cache_dir": str(tmp_path / "cache"),
    }
    return write_native_set(tmp_path / "data", corpus(), questions, config)


def sweep_eval(config: Path, *args: str, ray_address: str | None = None) -> tuple[dict, str]:
    env = {**os.environ, **RAY_ENV}
    env.pop("RAY_ADDRESS", None)
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    out = config.parent / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "sweep", "eval", str(config), "--json", str(out), *args],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())["mean"], proc.stdout + proc.stderr


@pytest.mark.slow
def test_ray_engine_encodes_a_slice_on_the_cluster_and_the_next_run_reads_it_from_the_cache(
    ray_head, tmp_path
):
    from sweep.cache import text_key
    from sweep.config.schema import DenseConfig
    from sweep.retrieval.dense import Encoder

    config = write_set(tmp_path, {"engine": "ray", "workers": 2, "batch_rows": 64})
    mean, output = sweep_eval(config, ray_address=ray_head)
    assert f"encoding on Ray ({ray_head})" in output

    # every chunk vector is in the cache, equal to the local encoder's
    texts = [d["text"] for d in corpus()]
    store = Encoder(DenseConfig(), str(tmp_path / "cache")).store
    found, rows = store.get_many([text_key(t) for t in texts])
    assert found.all()
    local = Encoder(DenseConfig(), str(tmp_path / "local-cache")).encode(texts)
    np.testing.assert_allclose(rows, local, atol=1e-6)

    # the next run finds everything cached: Ray is not even contacted, and the numbers are the same
    again, output = sweep_eval(config, ray_address=ray_head)
    assert "encoding on Ray" not in output
    assert again == mean
    # and they are the local engine's numbers
    local_mean, _ = sweep_eval(config, "encode.engine=local", f"cache_dir={tmp_path / 'local-cache'}")
    assert local_mean == mean


def test_ray_engine_without_ray_installed_is_one_line_naming_the_key(monkeypatch):
    from sweep.config.schema import EncodeConfig
    from sweep.errors import ConfigError
    from sweep.retrieval.ray_encode import connect

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ConfigError, match=r"encode.engine: ray needs Ray \(pip install 'rag-sweep\[ray\]'"):
        connect(EncodeConfig(engine="ray"))


def test_ray_engine_resolves_auto_to_the_workers_device():
    from sweep.config.schema import DenseConfig, EncodeConfig
    from sweep.retrieval.dense import Encoder

    gpus = Encoder(DenseConfig(), "/tmp/unused", EncodeConfig(engine="ray", gpus_per_worker=1))
    assert gpus.on_workers == ("cuda", "float16") and gpus.precision == "float16"
    cpus = Encoder(DenseConfig(), "/tmp/unused", EncodeConfig(engine="ray"))
    assert cpus.on_workers == ("cpu", "float32") and cpus.precision == "float32"
