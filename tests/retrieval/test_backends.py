"""Inference backends: float32 ONNX and OpenVINO give torch's vectors and rankings; lossy options are
kept apart in the cache and measured; two workers export one model once; a missing extra is one line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sweep.config.schema import DenseConfig, RerankConfig
from sweep.retrieval import Reranker, StageResult
from sweep.retrieval.dense import Encoder

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def slice_(shared_data):
    """20 SciFact test questions over their evidence and 60 other abstracts (~85 documents)."""
    from sweep.data import load_beir

    ds = load_beir(shared_data / "scifact", "test")
    questions = ds.questions[:20]
    wanted = {e.doc_id for q in questions for e in q.evidence}
    docs = [d for d in ds.documents if d.id in wanted] + [d for d in ds.documents[:80] if d.id not in wanted][
        :60
    ]
    return docs, questions


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("backends"))


def ndcg10(vectors: np.ndarray, query_vectors: np.ndarray, docs, questions) -> float:
    from sweep import score

    top = np.argsort(-(query_vectors @ vectors.T), axis=1, kind="stable")[:, :10]
    run = {q.id: [docs[i].id for i in row] for q, row in zip(questions, top)}
    qrels = {q.id: {e.doc_id: 1 for e in q.evidence} for q in questions}
    return score(qrels, run, ["ndcg@10"]).mean()["ndcg@10"]


def encode_all(config: DenseConfig, cache: str, docs, questions) -> tuple[np.ndarray, np.ndarray, Encoder]:
    encoder = Encoder(config, cache)
    texts = [f"{d.title} {d.text}" for d in docs] + ["", "x", "a b " * 400]  # empty, one letter, truncated
    return encoder.encode(texts), encoder.encode([q.text for q in questions]), encoder


@pytest.fixture(scope="module")
def torch_vectors(slice_, cache):
    return encode_all(DenseConfig(), cache, *slice_)


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_float32_backends_give_torchs_vectors_and_rankings(backend, slice_, cache, torch_vectors):
    docs, questions = slice_
    d, q, encoder = encode_all(DenseConfig(backend=backend, precision="float32"), cache, docs, questions)
    ref_d, ref_q, _ = torch_vectors
    assert encoder.stats.encoded == len(d) + len(q)  # its own cache: nothing came from torch's rows
    assert np.abs(d - ref_d).max() < 1e-5 and np.abs(q - ref_q).max() < 1e-5
    n = len(docs)
    assert abs(ndcg10(d[:n], q, docs, questions) - ndcg10(ref_d[:n], ref_q, docs, questions)) < 1e-4


@pytest.mark.parametrize("backend,precision", [("onnx", "int8"), ("openvino", "bfloat16")])
def test_lossy_options_are_measured_and_kept_apart(
    backend, precision, slice_, cache, torch_vectors, record_property
):
    docs, questions = slice_
    d, q, encoder = encode_all(DenseConfig(backend=backend, precision=precision), cache, docs, questions)
    ref_d, ref_q, torch_encoder = torch_vectors
    assert encoder.store.dir != torch_encoder.store.dir
    assert encoder.stats.encoded == len(d) + len(q)
    cosine = (d * ref_d).sum(axis=1)[: len(docs)]
    n = len(docs)
    ours, theirs = ndcg10(d[:n], q, docs, questions), ndcg10(ref_d[:n], ref_q, docs, questions)
    record_property(f"{backend}_{precision}_ndcg10_vs_torch", f"{ours:.4f} vs {theirs:.4f}")
    record_property(f"{backend}_{precision}_cosine_min", f"{cosine.min():.5f}")
    assert not np.array_equal(d, ref_d)  # a lossy option that changed nothing would not be running
    assert (
        cosine.min() > 0.95
    )  # the quantised model still encodes the same meaning (0.937 mean was too lossy)


def test_torch_float32_keeps_the_cache_key_it_always_had(cache):
    from sweep.cache import RowStore, content_key
    from sweep.models import model_identity

    old = RowStore(cache, content_key("embeddings", model_identity("minilm-l6"), True, None))
    assert Encoder(DenseConfig(device="cpu"), cache).store.dir == old.dir
    keys = {
        Encoder(DenseConfig(device="cpu", backend=b, precision=p), cache).store.dir
        for b, p in [("torch", "float32"), ("torch", "bfloat16"), ("onnx", "float32"), ("onnx", "int8")]
        + [("openvino", "float32"), ("openvino", "bfloat16")]
    }
    assert len(keys) == 6


EXPORTER = """
import logging, sys
sys.path.insert(0, sys.argv[3])
logging.basicConfig(level=logging.INFO, format="%(message)s")
from sweep.config.schema import DenseConfig
from sweep.retrieval.dense import Encoder
import numpy as np
sys.stdin.readline()  # both start together
config = DenseConfig(backend="onnx", precision=sys.argv[2])
vectors = Encoder(config, sys.argv[1]).encode(["two workers", "one file", sys.argv[4]])  # each has a text of its own
np.save(sys.stdout.buffer, vectors)
"""


@pytest.mark.slow
def test_two_workers_exporting_one_model_make_it_once(tmp_path):
    import io

    procs = [
        subprocess.Popen(
            [sys.executable, "-c", EXPORTER, str(tmp_path), "int8", str(ROOT / "src"), f"worker {i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(2)
    ]
    for p in procs:
        p.stdin.write(b"go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][1].decode()[-2000:]
    logs = b"".join(err for _, err in outs).decode()
    # one made it, the other waited and read it
    assert logs.count("exporting sentence-transformers") == 1, logs[-3000:]
    a, b = (np.load(io.BytesIO(out)) for out, _ in outs)
    assert np.array_equal(a[:2], b[:2]) and not np.array_equal(a[2], b[2])
    files = sorted(p.name for p in (tmp_path / "models").rglob("*") if p.is_file() and p.suffix != ".lock")
    assert files == ["model.int8.onnx", "model.onnx"]  # no half-written part left behind


def test_cross_encoder_on_onnx_scores_as_torch(tiny_cross_encoder, tmp_path):
    from sentence_transformers import CrossEncoder

    queries = ["what is a cell", "stars in the sky"]
    texts = ["cells are units of life", "the sky at night", "stars burn hydrogen", "membranes wrap cells"]
    first = StageResult(np.array([[0, 1, 2, 3], [1, 2, 0, 3]]), np.array([[4.0, 3, 2, 1], [4, 3, 2, 1]]))
    config = RerankConfig(
        enabled=True, kind="cross_encoder", model=tiny_cross_encoder, depth=4, backend="onnx"
    )
    out = Reranker(config, str(tmp_path)).rerank(queries, texts, first)
    reference = CrossEncoder(tiny_cross_encoder, device="cpu")
    for q in range(2):
        expected = reference.predict([(queries[q], texts[c]) for c in out.ids[q]])
        assert np.abs(out.scores[q] - expected).max() < 1e-5
    torch_store = Reranker(config.model_copy(update={"backend": "torch"}), str(tmp_path))._store
    assert torch_store.dir != Reranker(config, str(tmp_path))._store.dir


def test_a_backend_that_is_not_installed_is_one_line_naming_the_key_and_the_extra(
    tmp_path, monkeypatch, capsys
):
    import importlib.util

    from sweep.cli import main

    config = tmp_path / "c.yaml"
    config.write_text(
        textwrap.dedent(
            """
            dataset: {loader: python_reference, path: bundled}
            retrieval: {mode: dense}
            """
        )
    )
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a)
    )
    assert main(["eval", str(config), "retrieval.dense.backend=openvino"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "retrieval.dense.backend" in err and "pip install 'rag-sweep[openvino]'" in err, err
    assert main(["eval", str(config), "retrieval.dense.precision=int8"]) == 2  # int8 is onnx's
    assert "backend torch runs precision float32, float16, bfloat16, not int8" in capsys.readouterr().err


def test_backend_choices_in_a_search_space_are_checked_at_start(tmp_path, monkeypatch):
    import importlib.util

    from sweep.errors import ConfigError
    from sweep.tuning.sweep_config import load_sweep_config

    config = tmp_path / "s.yaml"
    config.write_text(
        json.dumps(
            {
                "dataset": {"loader": "python_reference", "path": "bundled"},
                "retrieval": {"mode": "dense"},
                "search": {
                    "trials": 2,
                    "space": {"retrieval.dense.backend": {"categorical": ["torch", "onnx"]}},
                },
            }
        )
    )
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"rag-sweep\[onnx\]") as e:
        load_sweep_config(config)
    assert "search.space.retrieval.dense.backend" in str(e.value)
