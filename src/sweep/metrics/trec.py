"""TREC qrels and run files, scored with trec_eval's semantics.

* qrels: ``qid iter docid grade``; run: ``qid Q0 docid rank score tag``.
* A run is ordered by score descending, ties by docid descending (strcmp
  order), as trec_eval does; the rank column is ignored.
* A query with qrels but nothing in the run counts 0 in every measure
  (``trec_eval -c``); queries without relevant qrels are skipped and listed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from pathlib import Path

import numpy as np

from ..errors import DataError, Problem
from ..labels import Labels, document_labels
from ..textfile import numbered_lines
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


def strictly_decreasing(scores: np.ndarray) -> np.ndarray:
    """The scores of one ranking, tied ones nudged down by one step each, so that any tool's tie rule
    (trec_eval: docid descending) keeps the ranking's own order.

    The steps are float32 ones: trec_eval keeps scores in single precision, so two scores one float64
    step apart would tie there. Every float32 value is exact in float64, so the other tools agree.
    """
    out = np.asarray(scores, dtype=np.float32).copy()
    for i in range(1, len(out)):
        if out[i] >= out[i - 1]:
            out[i] = np.nextafter(out[i - 1], np.float32(-np.inf))
    return out.astype(np.float64)


def write_run(path: str | Path, rankings: Mapping[str, Sequence[tuple[str, float]]], tag: str = "rag-sweep") -> Path:
    """Write rankings as a TREC run file (``qid Q0 docid rank score tag``), exactly reproducible by trec_eval.

    Args:
        path: the file to write.
        rankings: ``{question: [(docid, score), ...]}`` best first.
        tag: the run's name (last column).

    Returns:
        The path written.

    Example:
        >>> write_run("run.trec", {"q1": [("d2", 0.9), ("d1", 0.9)]})  # d1's 0.9 is written a hair lower
    """
    lines = []
    for qid, ranked in rankings.items():
        scores = strictly_decreasing(np.array([s for _, s in ranked], dtype=np.float64))
        lines += [f"{qid} Q0 {doc} {rank} {score!r} {tag}" for rank, ((doc, _), score) in
                  enumerate(zip(ranked, scores.tolist()), 1)]  # fmt: skip
    Path(path).write_text("\n".join(lines) + ("\n" if lines else ""))
    return Path(path)


QrelsInput = Mapping[str, Mapping[str, int]] | str | Path
RunInput = Mapping[str, Mapping[str, float]] | Mapping[str, Sequence[str]] | str | Path


def qrels_from(qrels: QrelsInput) -> TrecQrels:
    """A TREC qrels file's path, or ``{question: {document: grade}}`` (pytrec_eval's and ranx's shape)."""
    if isinstance(qrels, (str, Path)):
        return read_qrels(qrels)
    qids = list(chain.from_iterable(repeat(q, len(docs)) for q, docs in qrels.items()))
    docids = list(chain.from_iterable(docs.keys() for docs in qrels.values()))
    try:
        grades = np.fromiter(chain.from_iterable(docs.values() for docs in qrels.values()), np.int64, len(docids))
    except (TypeError, ValueError):
        raise DataError([Problem("qrels", "grades must be integers, as in {question: {document: 1}}")]) from None
    if not qids:
        raise DataError([Problem("qrels", "no judgments: the qrels are empty")])
    return TrecQrels(qids, docids, grades)


def run_from(run: RunInput) -> TrecRun:
    """A TREC run file's path, ``{question: {document: score}}``, or ``{question: [documents, best first]}``.

    A list is a ranking: its order is kept exactly (scores ``-1, -2, ...``), so no tie rule can move it.
    """
    if isinstance(run, (str, Path)):
        return read_run(run)
    qids = list(chain.from_iterable(repeat(q, len(docs)) for q, docs in run.items()))
    if all(isinstance(docs, Mapping) for docs in run.values()):
        docids = list(chain.from_iterable(docs.keys() for docs in run.values()))
        try:
            scores = np.fromiter(chain.from_iterable(docs.values() for docs in run.values()), np.float64, len(docids))
        except (TypeError, ValueError):
            raise DataError([Problem("run", "scores must be numbers, as in {question: {document: 0.7}}")]) from None
        if not np.isfinite(scores).all():
            raise DataError([Problem("run", "a score is NaN or infinite: the ranking would be arbitrary")])
    elif all(isinstance(docs, Sequence) and not isinstance(docs, str) for docs in run.values()):
        docids = list(chain.from_iterable(run.values()))
        scores = -np.concatenate([np.arange(1, len(d) + 1, dtype=np.float64) for d in run.values()] or [np.zeros(0)])
        if len(set(zip(qids, docids))) != len(docids):
            raise DataError([Problem("run", "a document is listed twice for one question")])
    else:
        raise DataError([Problem("run", "give every question a {document: score} dict, or every question a list")])
    return TrecRun(qids, docids, scores)


def score(qrels: QrelsInput, run: RunInput, metrics: Sequence[str] | None = None, threshold: int = 1) -> Scores:
    """Score a run against qrels with trec_eval's semantics (ties: document id descending).

    Args:
        qrels: ``{question: {document: grade}}`` or a TREC qrels file (``qid iter docid grade``).
        run: ``{question: {document: score}}``, ``{question: [document, ...]}`` in rank order, or a
            TREC run file (``qid Q0 docid rank score tag``).
        metrics: names such as ``"ndcg@10"``, ``"recall@5"``, ``"mrr"``; default: the standard set.
        threshold: the lowest grade that counts as relevant.

    Returns:
        :class:`Scores`: per-question values (``.values``) and means (``.mean()``); questions
        without a relevant judgment are left out and listed in ``.skipped``.

    Example:
        >>> s = score({"q1": {"d1": 1}}, {"q1": {"d2": 0.9, "d1": 0.5}}, ["mrr", "recall@1"])
        >>> s.mean()
        {'mrr': 0.5, 'recall@1': 0.0}
    """
    matrix, labels = trec_inputs(qrels_from(qrels), run_from(run), threshold)
    return evaluate(matrix, labels, list(metrics) if metrics else None)
