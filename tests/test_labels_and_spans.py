"""Span evidence resolved onto chunks, first-hit crediting, and Chroma's character metrics."""

from __future__ import annotations

import random

import numpy as np
import pytest

from sweep.chunking import ChunkingConfig, ChunkSet, chunk_corpus
from sweep.data.model import Document, EvalSet, Evidence, Question
from sweep.labels import HitRule, resolve_labels
from sweep.metrics import evaluate, span_metrics

TEXT = "0123456789" * 10  # 100 characters


def one_doc_set(evidence: list[Evidence], extra_docs: int = 0) -> EvalSet:
    docs = [Document("d", TEXT)] + [Document(f"x{i}", TEXT) for i in range(extra_docs)]
    return EvalSet("t", docs, [Question("q", "?", tuple(evidence))])


def fixed10(eval_set: EvalSet) -> ChunkSet:
    return chunk_corpus(eval_set, ChunkingConfig("fixed", 10, 0, "chars"))  # chunk i = [10i, 10i+10)


def hit_chunks(eval_set, chunks, rule=None):
    labels = resolve_labels(eval_set, chunks, rule or HitRule())
    return sorted(int(k % labels.n_chunks) for k in labels.pair_key)


def test_hit_rule_half_of_the_span_or_half_of_the_chunk():
    ds = one_doc_set([Evidence("d", 1, 14, 22)])  # 6 chars in chunk 1, 2 in chunk 2
    assert hit_chunks(ds, fixed10(ds)) == [1]
    assert hit_chunks(ds, fixed10(ds), HitRule(min_overlap=0.2)) == [1, 2]
    long = one_doc_set([Evidence("d", 1, 5, 34)])  # 0: half of it inside; 1, 2 wholly; 3: 4 of 10
    assert hit_chunks(long, fixed10(long)) == [0, 1, 2]
    assert hit_chunks(long, fixed10(long), HitRule(min_overlap=1.0)) == [1, 2]


def test_document_level_evidence_hits_every_chunk_of_its_document():
    ds = one_doc_set([Evidence("d", 1)], extra_docs=1)
    assert hit_chunks(ds, fixed10(ds)) == list(range(10))


def test_each_item_is_credited_once_at_its_first_hit():
    ds = one_doc_set([Evidence("d", 2, 0, 30), Evidence("d", 1, 50, 55)])
    labels = resolve_labels(ds, fixed10(ds))
    run = np.array([[1, 0, 5, 2, 7]])  # chunks 1, 0, 2 all hit item 0; chunk 5 hits item 1
    scores = evaluate(run, labels, ["recall@1", "recall@3", "precision@5", "map", "ndcg@5"]).mean()
    assert scores["recall@1"] == 0.5 and scores["recall@3"] == 1.0
    assert scores["precision@5"] == pytest.approx(2 / 5)
    assert scores["map"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    dcg = 2 + 1 / np.log2(4)
    assert scores["ndcg@5"] == pytest.approx(dcg / (2 + 1 / np.log2(3)))


def test_char_metrics_by_hand():
    # excerpt [12, 18) and [40, 45); retrieve chunks [10,20) and [0,10)
    ds = one_doc_set([Evidence("d", 1, 12, 18), Evidence("d", 1, 40, 45)])
    chunks = fixed10(ds)
    labels = resolve_labels(ds, chunks)
    m = span_metrics(np.array([[1, 0]]), labels, chunks, n=2)
    assert m["char_recall@2"][0] == pytest.approx(6 / 11)
    assert m["char_precision@2"][0] == pytest.approx(6 / 20)
    assert m["char_iou@2"][0] == pytest.approx(6 / (20 + 5))


def chroma_reference(refs, retrieved):
    """Chroma's loop (base_evaluation.py) restated: refs and chunks as (doc, start, end)."""
    covered, unused = set(), 0
    for d, s, e in refs:
        mine = {i for cd, cs, ce in retrieved if cd == d for i in range(max(s, cs), min(e, ce))}
        covered |= {(d, i) for i in mine}
        unused += (e - s) - len(mine)
    retrieved_chars = sum(ce - cs for _, cs, ce in retrieved)
    num = len(covered)
    return num / sum(e - s for _, s, e in refs), num / retrieved_chars, num / (retrieved_chars + unused)


def test_char_metrics_match_a_brute_force_reference():
    rng = random.Random(7)
    docs = [Document(f"d{i}", "x" * rng.randint(50, 300)) for i in range(4)]
    questions = []
    for qi in range(60):
        d = rng.randrange(4)
        n = len(docs[d].text)
        ev = []
        for _ in range(rng.randint(1, 3)):
            s = rng.randrange(n - 1)
            ev.append(Evidence(docs[d].id, 1, s, rng.randint(s + 1, min(n, s + 60))))
        questions.append(Question(f"q{qi}", "?", tuple(ev)))
    ds = EvalSet("r", docs, questions)
    chunks = chunk_corpus(ds, ChunkingConfig("fixed", 25, 10, "chars"))
    labels = resolve_labels(ds, chunks)
    run = np.array([rng.sample(range(len(chunks)), 5) for _ in questions])
    ours = span_metrics(run, labels, chunks, n=5)
    for qi, q in enumerate(questions):
        refs = [(ds.doc_index[e.doc_id], e.start, e.end) for e in q.evidence]
        retrieved = [(int(chunks.doc[c]), int(chunks.start[c]), int(chunks.end[c])) for c in run[qi]]
        rec, prec, iou = chroma_reference(refs, retrieved)
        assert ours["char_recall@5"][qi] == pytest.approx(rec)
        assert ours["char_precision@5"][qi] == pytest.approx(prec)
        assert ours["char_iou@5"][qi] == pytest.approx(iou)


def test_judged_at_k_and_bpref_over_chunks_by_hand():
    """Grade 0 evidence is judged, not relevant: chunks over it are judged; unjudged chunks are ignored."""
    ds = one_doc_set([Evidence("d", 2, 0, 10), Evidence("d", 0, 30, 50), Evidence("d", 1, 70, 80)])
    labels = resolve_labels(ds, fixed10(ds))
    # ranks: 9 unjudged, 3 judged non-relevant (item 1), 0 relevant, 4 the same non-relevant item, 7 relevant
    run = np.array([[9, 3, 0, 4, 7, 5]])
    s = evaluate(run, labels, ["judged@1", "judged@3", "judged@5", "judged@10", "bpref", "recall@5"]).mean()
    assert (s["judged@1"], s["judged@3"], s["judged@5"], s["judged@10"]) == (0, 2 / 3, 4 / 5, 4 / 10)
    # R = 2, N = 1 (one non-relevant item, though two chunks show it): both relevant items rank below it
    assert s["bpref"] == 0.0 and s["recall@5"] == 1.0
    better = evaluate(np.array([[0, 9, 3, 7]]), labels, ["bpref"]).mean()
    assert better["bpref"] == 0.5  # chunk 0 above the non-relevant one (1), chunk 7 below it (0)
