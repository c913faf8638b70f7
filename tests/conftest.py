"""Shared fixtures. The real data lives beside the repo in ../shared/data.

Tests that need it fail loudly when it is missing: CI always has it, and a
skip would hide a broken checkout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA}: the tests need ../shared/data beside the repo")
    return SHARED_DATA


def doc_level(qrels: dict[str, dict[str, int]], rankings: dict[str, list[str]], threshold: int = 1):
    """(run matrix, labels) for document-level cases written as plain dicts.

    A ranking is listed best first; it is given strictly decreasing scores so
    the order is exactly the one written.
    """
    from sweep.metrics.runfiles import TrecQrels, TrecRun
    from sweep.metrics.trec import trec_inputs

    q = TrecQrels(
        [qid for qid, docs in qrels.items() for _ in docs],
        [d for docs in qrels.values() for d in docs],
        np.array([g for docs in qrels.values() for g in docs.values()], dtype=np.int64),
    )
    r = TrecRun(
        [qid for qid, docs in rankings.items() for _ in docs],
        [d for docs in rankings.values() for d in docs],
        np.array([float(len(docs) - i) for docs in rankings.values() for i in range(len(docs))]),
    )
    return trec_inputs(q, r, threshold)


def measure(qrels, rankings, metric: str, threshold: int = 1) -> dict[str, float]:
    from sweep.metrics import evaluate

    run, labels = doc_level(qrels, rankings, threshold)
    return {
        qid: float(v) for qid, v in zip(labels.question_ids, evaluate(run, labels, [metric]).values[metric])
    }


TOPICS = {
    "lists": "Python lists are mutable sequences that grow as items are appended.",
    "tuples": "Tuples are immutable sequences, often used for fixed records.",
    "dicts": "Dictionaries map hashable keys to values with average constant-time lookup.",
    "sets": "Sets hold unique hashable elements and support union and intersection.",
    "strings": "Strings are immutable sequences of Unicode code points.",
    "bytes": "Bytes objects are immutable sequences of single bytes.",
    "gen": "Generators produce values lazily with the yield statement.",
    "ctx": "Context managers run setup and cleanup code around a with block.",
}
QUESTIONS = [
    ("q1", "which sequence type can change after creation", "lists"),
    ("q2", "fixed records that cannot be modified", "tuples"),
    ("q3", "key value mapping with fast lookup", "dicts"),
    ("q4", "unique elements with union", "sets"),
    ("q5", "text made of unicode characters", "strings"),
    ("q6", "raw binary data sequence", "bytes"),
    ("q7", "lazy production of values", "gen"),
    ("q8", "cleanup code around a block", "ctx"),
]


def write_native_set(folder: Path, docs: list[dict], questions: list[dict], config: dict) -> Path:
    """A native-format eval set (corpus.jsonl, questions.jsonl) in ``folder``, and ``config`` as c.yaml in
    the folder above it (so ``dataset.path`` is the folder's name). Returns the config's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    (folder / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions))
    (folder.parent / "c.yaml").write_text(yaml.safe_dump(config))
    return folder.parent / "c.yaml"


@pytest.fixture()
def fixture_config(tmp_path: Path) -> Path:
    return write_fixture_config(tmp_path)


def write_fixture_config(tmp_path: Path) -> Path:
    """Eight topics, eight questions, a hybrid config and a small fusion space: a sweep in seconds."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_text("\n".join(json.dumps({"id": k, "text": v}) for k, v in TOPICS.items()))
    (data / "questions.jsonl").write_text(
        "\n".join(
            json.dumps({"id": q, "text": t, "evidence": [{"doc_id": d, "grade": 1}]}) for q, t, d in QUESTIONS
        )
    )
    config = {
        "dataset": {"loader": "native", "path": "data"},
        "chunking": {"strategy": "document"},
        "retrieval": {"mode": "hybrid", "candidates": 8, "top_k": 5, "bm25": {"stemming": "none"}},
        "evaluation": {"ks": [1, 3, 5]},
        "cache_dir": str(tmp_path / "cache"),
        "search": {
            "objective": "ndcg@5",
            "trials": 10,
            "seed": 3,
            "space": {
                "retrieval.fusion.method": {"categorical": ["linear", "rrf"]},
                "retrieval.fusion.alpha": {
                    "float": [0, 1],
                    "step": 0.25,
                    "when": {"retrieval.fusion.method": "linear"},
                },
                "retrieval.fusion.rrf_k": {
                    "int": [10, 60],
                    "step": 10,
                    "when": {"retrieval.fusion.method": "rrf"},
                },
                "retrieval.top_k": {"int": [3, 5]},
            },
        },
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return tmp_path / "sweep.yaml"


def create_database(suffix: str = "") -> tuple[str, callable]:
    """A fresh database on the local PostgreSQL (present on dev machines and in CI) and its dropper."""
    import uuid

    import psycopg

    name = f"sweep_test_{uuid.uuid4().hex[:10]}{suffix}"
    admin = None
    for user in ("root", "postgres"):
        try:
            admin = psycopg.connect(host="127.0.0.1", port=5432, user=user, dbname="test", autocommit=True)
            break
        except psycopg.OperationalError:
            continue
    if admin is None:
        pytest.fail("PostgreSQL on 127.0.0.1:5432 is not reachable (user root or postgres, database test)")
    admin.execute(f"CREATE DATABASE {name}")

    def drop() -> None:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()

    return f"postgresql://{admin.info.user}@127.0.0.1:5432/{name}", drop


@pytest.fixture()
def postgres_url():
    url, drop = create_database()
    yield url
    drop()


@pytest.fixture()
def second_postgres_url():
    """MLflow's tables in a database of their own (Optuna and MLflow both keep an alembic_version table)."""
    url, drop = create_database("_mlflow")
    yield url
    drop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlflow_server(backend: str, artifacts: Path, port: int, log: Path, timeout: float = 120):
    """A real ``mlflow server`` on 127.0.0.1:port, returned once /health answers."""
    import subprocess
    import sys
    import time
    import urllib.request

    exe = Path(sys.executable).parent / "mlflow"
    server = subprocess.Popen(
        [
            str(exe),
            "server",
            "--backend-store-uri",
            backend,
            "--artifacts-destination",
            str(artifacts),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=open(log, "a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return server
        except OSError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            pytest.fail("mlflow server did not start:\n" + log.read_text()[-3000:])
        time.sleep(0.5)


def stop_server(server) -> None:
    """Stop the server and everything it started (its gunicorn/uvicorn workers)."""
    import os
    import signal

    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait(timeout=30)


def write_scifact_slice(
    shared_data: Path, folder: Path, n_train: int = 30, n_test: int = 30, n_other: int = 120
) -> Path:
    """A native eval set cut from SciFact: train and test questions (its own splits), their relevant
    abstracts and ``n_other`` distractors. Document labels, so a run file over document ids is exact."""
    from sweep.data import load_beir

    picked = []
    for split, n in (("train", n_train), ("test", n_test)):
        picked += [(split, q) for q in load_beir(shared_data / "scifact", split).questions[:n]]
    full = load_beir(shared_data / "scifact", "test")
    wanted = {e.doc_id for _, q in picked for e in q.evidence}
    docs = [d for d in full.documents if d.id in wanted] + [
        d for d in full.documents[:n_other] if d.id not in wanted
    ]
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) for d in docs)
    )
    (folder / "questions.jsonl").write_text(
        "\n".join(
            json.dumps(
                {
                    "id": q.id,
                    "text": q.text,
                    "split": split,
                    "evidence": [{"doc_id": e.doc_id, "grade": e.grade} for e in q.evidence],
                }
            )
            for split, q in picked
        )
    )
    return folder


def start_chat_server(answer):
    """A local server speaking OpenAI's chat-completions protocol: ``answer(body)`` gives the reply
    content (a string), or ``(status, bytes)`` for an error. Returns (API base URL, the requests
    seen, a function that stops it)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            content = answer(body)
            if isinstance(content, tuple):
                status, data = content
            else:
                status = 200
                data = json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": content}}]}
                ).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}/v1", seen, stop


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """A 2-layer CrossEncoder with random weights and MiniLM's tokenizer: plumbing only."""
    import shutil

    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from sweep.models import resolve_model

    folder = tmp_path_factory.mktemp("tiny-ce")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    src = resolve_model("minilm-l6")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (Path(src) / name).exists():
            shutil.copy(Path(src) / name, folder / name)
    return str(folder)


@pytest.fixture(scope="session")
def tiny_bi_encoder(tiny_cross_encoder, tmp_path_factory):
    """A 2-layer bi-encoder with random weights (the tiny cross-encoder's core, mean-pooled): a planted
    weak model, fast to encode with and far worse than MiniLM at ranking."""
    from sentence_transformers import SentenceTransformer, models

    folder = tmp_path_factory.mktemp("tiny-bi")
    transformer = models.Transformer(tiny_cross_encoder, max_seq_length=128)
    pooling = models.Pooling(transformer.get_embedding_dimension(), "mean")
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(folder))
    return str(folder)
