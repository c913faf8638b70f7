"""TREC qrels and run files, scored with trec_eval's semantics.

* qrels: ``qid iter docid grade``; run: ``qid Q0 docid rank score tag``.
* A run is ordered by score descending, ties by docid descending (strcmp
  order), as trec_eval does; the rank column is ignored.
* A query with qrels but nothing in the run counts 0 in every measure
  (``trec_eval -c``); queries without relevant qrels are skipped and listed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError, Problem
from ..textfile import numbered_lines
from ..labels import Labels, document_labels
from .evaluate import Scores, evaluate


@dataclass
class TrecQrels:
    qid: list[str]
    docid: list[str]
    grade: np.ndarray


@dataclass
class TrecRun:
    qid: list[str]
    docid: list[str]
    score: np.ndarray


def read_qrels(path: str | Path) -> TrecQrels:
    qids, docids, grades, problems = [], [], [], []
    seen: set[tuple[str, str]] = set()
    for n, parts in _rows(path):
        if len(parts) != 4:
            problems.append(Problem(str(path), f"expected 4 columns 'qid iter docid grade', got {len(parts)}", n))
            continue
        try:
            grades.append(int(parts[3]))
        except ValueError:
            problems.append(Problem(str(path), f"grade {parts[3]!r} is not an integer", n, "grade"))
            continue
        if (parts[0], parts[2]) in seen:
            problems.append(Problem(str(path), f"duplicate qrel for query {parts[0]!r}, document {parts[2]!r}", n))
            grades.pop()
            continue
        seen.add((parts[0], parts[2]))
        qids.append(parts[0])
        docids.append(parts[2])
    if not qids and not problems:
        problems.append(Problem(str(path), "no judgments: the qrels file is empty (one 'qid iter docid grade' a line)"))
    if problems:
        raise DataError(problems)
    return TrecQrels(qids, docids, np.asarray(grades, dtype=np.int64))


def read_run(path: str | Path) -> TrecRun:
    qids, docids, scores, problems = [], [], [], []
    for n, parts in _rows(path):
        if len(parts) != 6:
            problems.append(Problem(str(path), f"expected 6 columns 'qid Q0 docid rank score tag', got {len(parts)}", n))
            continue
        try:
            scores.append(float(parts[4]))
        except ValueError:
            problems.append(Problem(str(path), f"score {parts[4]!r} is not a number", n, "score"))
            continue
        if not math.isfinite(scores[-1]):
            scores.pop()  # NaN sorts anywhere: the ranking, and every measure, would be arbitrary
            problems.append(Problem(str(path), f"score {parts[4]!r} is not a finite number", n, "score"))
            continue
        qids.append(parts[0])
        docids.append(parts[2])
    if problems:
        raise DataError(problems)
    return TrecRun(qids, docids, np.asarray(scores, dtype=np.float64))


def _rows(path: str | Path):
    for n, line in numbered_lines(path):
        yield n, line.split()


def trec_inputs(qrels: TrecQrels, run: TrecRun, threshold: int = 1) -> tuple[np.ndarray, Labels]:
    """The run as a ``(questions, depth)`` matrix of doc indices, and its labels."""
    vocab, inverse = np.unique(np.asarray(qrels.docid + run.docid, dtype=object).astype(str), return_inverse=True)
    qrel_doc, run_doc = inverse[: len(qrels.docid)], inverse[len(qrels.docid) :]

    q_vocab = {}
    for q in qrels.qid:
        q_vocab.setdefault(q, len(q_vocab))
    qrel_q = np.fromiter((q_vocab[q] for q in qrels.qid), np.int64, len(qrels.qid))
    has_rel = np.zeros(len(q_vocab), dtype=bool)
    has_rel[qrel_q[qrels.grade >= threshold]] = True
    kept = np.flatnonzero(has_rel)  # question row order: first appearance in qrels
    row_of_q = np.full(len(q_vocab), -1)
    row_of_q[kept] = np.arange(len(kept))
    question_ids = [q for q, i in q_vocab.items() if has_rel[i]]
    skipped = [q for q, i in q_vocab.items() if not has_rel[i]]
    skipped += sorted({q for q in run.qid if q not in q_vocab})

    # labels: one item per qrel of a kept question, the whole "document" as its span
    kept_item = has_rel[qrel_q]
    labels = document_labels(
        question_ids,
        row_of_q[qrel_q[kept_item]],
        qrel_doc[kept_item],
        qrels.grade[kept_item],
        len(vocab),
        threshold,
        skipped,
    )

    # run matrix: rows of kept questions, sorted by (score desc, docid desc)
    run_q = np.fromiter((row_of_q[q_vocab[q]] if q in q_vocab else -1 for q in run.qid), np.int64, len(run.qid))
    keep = run_q >= 0
    rq, rd, rs = run_q[keep], run_doc[keep], run.score[keep]
    order = np.lexsort((-rd, -rs, rq))
    rq, rd = rq[order], rd[order]
    counts = np.bincount(rq, minlength=len(question_ids))
    depth = int(counts.max(initial=0))
    matrix = np.full((len(question_ids), max(depth, 1)), -1, dtype=np.int64)
    col = np.arange(len(rq)) - np.repeat(np.cumsum(counts) - counts, counts)
    matrix[rq, col] = rd
    return matrix, labels


def score_trec(qrels_path: str | Path, run_path: str | Path, metrics: list[str], threshold: int = 1) -> Scores:
    matrix, labels = trec_inputs(read_qrels(qrels_path), read_run(run_path), threshold)
    return evaluate(matrix, labels, metrics)
