"""Shared fixtures. The real data lives beside the repo in ../shared/data.

Tests that need it fail loudly when it is missing: CI always has it, and a
skip would hide a broken checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

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
    from sweep.metrics.trec import TrecQrels, TrecRun, trec_inputs

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
    return {qid: float(v) for qid, v in zip(labels.question_ids, evaluate(run, labels, [metric]).values[metric])}
