"""Scoring TREC-style inputs with trec_eval's semantics, from dicts or files.

* A run is ordered by score descending, ties by docid descending (strcmp
  order), as trec_eval does; the rank column is ignored.
* A query with qrels but nothing in the run counts 0 in every measure
  (``trec_eval -c``); queries without relevant qrels are skipped and listed.

Only the judged documents of a run need a place: the rank of each is the number of documents of its
question scored higher (plus, on a tie, those with a larger docid), so a run of 10,000 questions ×
100 documents costs one pass over its scores, not a sort of a million strings. Every other retrieved
document shares one "not relevant" index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain, repeat
from pathlib import Path

import numpy as np

from sweep.errors import DataError, Problem
from sweep.labels import Labels, document_labels
from sweep.metrics.evaluate import Scores, evaluate
from sweep.metrics.runfiles import TrecQrels, TrecRun, read_qrels, read_run_columns

QrelsInput = Mapping[str, Mapping[str, int]] | str | Path
RunInput = Mapping[str, Mapping[str, float]] | Mapping[str, Sequence[str]] | str | Path
BLOCK = 8192  # judged documents compared with their question's scores at once (bounded memory)


class _Judged:
    """The qrels of the questions that have a relevant one, as labels over the judged documents.

    With ``run`` (a dict run), the judged documents it retrieved are found in the same pass (``hits``).
    """

    def __init__(self, qrels: Mapping[str, Mapping[str, int]], threshold: int, run: Mapping | None = None):
        kept = [q for q, docs in qrels.items() if docs and max(docs.values()) >= threshold]
        self.rows = {q: i for i, q in enumerate(kept)}
        self.skipped = [q for q, docs in qrels.items() if docs and q not in self.rows]
        self.question_ids = kept
        self.docs: dict[str, int] = {}  # judged document -> index; the next index is "not judged"
        item_q, item_d, item_g = [], [], []
        hits: tuple[list, list, list, list] = ([], [], [], [])
        docs_index = self.docs
        for row, q in enumerate(kept):
            found = run.get(q) if run is not None else None
            for d, g in qrels[q].items():
                if g > 0:  # grade 0 and below: not an item (trec_eval's gain 0)
                    idx = docs_index.setdefault(d, len(docs_index))
                    item_q.append(row)
                    item_d.append(idx)
                    item_g.append(g)
                    if found is not None and (value := found.get(d)) is not None:
                        hits[0].append(row), hits[1].append(value), hits[2].append(idx), hits[3].append(d)
        self.item = (np.array(item_q, np.int64), np.array(item_d, np.int64), np.array(item_g, np.int64))
        self.hits = hits
        self.threshold = threshold

    def pairs(self, qrels: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, str], tuple[int, int]]:
        """(question, document) -> (row, document index) of every item, to find them in run columns."""
        return {(q, d): (r, self.docs[d]) for q, r in self.rows.items() for d, g in qrels[q].items() if g > 0}

    def run_only(self, qids) -> list[str]:
        """Questions of the run that the qrels do not have: skipped and listed, as trec_eval does."""
        known = set(self.rows).union(self.skipped)
        return sorted(set(qids).difference(known))

    def labels(self, run_only: list[str]) -> Labels:
        n_docs = len(self.docs) + 1
        return document_labels(self.question_ids, *self.item, n_docs, self.threshold, self.skipped + run_only)


def _assemble(judged: _Judged, row: np.ndarray, score: np.ndarray, hits: tuple, tied: Callable) -> np.ndarray:
    """The ``(questions, depth)`` matrix: judged documents at their trec_eval rank, the rest "not judged".

    ``row``/``score``: every run entry's question row (-1: not scored) and score; ``hits``: the judged
    entries' (row, score, document index, docid); ``tied(row, score)``: the docids of a question's
    entries with exactly that score (asked only on ties).
    """
    keep = row >= 0
    r, s = row[keep], score[keep]
    n_rows = len(judged.question_ids)
    counts = np.bincount(r, minlength=n_rows)
    depth = max(int(counts.max(initial=0)), 1)
    if len(r) and not np.all(r[1:] >= r[:-1]):
        order = np.argsort(r, kind="stable")
        r, s = r[order], s[order]
    col = np.arange(len(r)) - np.repeat(np.cumsum(counts) - counts, counts)
    scores = np.full((n_rows, depth), -np.inf)
    scores[r, col] = s
    h_row, h_score, h_doc, h_docid = hits
    rank = np.empty(len(h_row), dtype=np.int64)
    ties = np.zeros(len(h_row), dtype=bool)
    for a in range(0, len(h_row), BLOCK):
        rows, own = scores[h_row[a : a + BLOCK]], h_score[a : a + BLOCK, None]
        rank[a : a + BLOCK] = (rows > own).sum(1)
        ties[a : a + BLOCK] = (rows == own).sum(1) > 1
    for i in np.flatnonzero(ties).tolist():  # equal scores: the larger docid ranks first (trec_eval)
        rank[i] += sum(d > h_docid[i] for d in tied(int(h_row[i]), float(h_score[i])))
    matrix = np.where(np.arange(depth)[None, :] < counts[:, None], len(judged.docs), -1)
    matrix[h_row, rank] = h_doc
    return matrix


def _hits(rows: list, scores: list, docs: list, docids: list) -> tuple:
    return (np.array(rows, np.int64), np.array(scores, np.float64), np.array(docs, np.int64), docids)


def _from_dicts(qrels: Mapping, run: Mapping[str, Mapping[str, float]], threshold: int):
    judged = _Judged(qrels, threshold, run)
    values = list(run.values())
    lens = np.fromiter(map(len, values), np.int64, len(values))
    try:
        score = np.fromiter(chain.from_iterable(d.values() for d in values), np.float64, int(lens.sum()))
    except (TypeError, ValueError):
        raise DataError(
            [Problem("run", "scores must be numbers, as in {question: {document: 0.7}}")]
        ) from None
    if not np.isfinite(score).all():
        raise DataError([Problem("run", "a score is NaN or infinite: the ranking would be arbitrary")])
    row = np.repeat(np.fromiter((judged.rows.get(q, -1) for q in run), np.int64, len(run)), lens)

    def tied(r: int, value: float) -> list[str]:
        return [d for d, v in run[judged.question_ids[r]].items() if v == value]

    run_only = judged.run_only(q for q, docs in run.items() if docs)
    return _assemble(judged, row, score, _hits(*judged.hits), tied), judged.labels(run_only)


def _from_columns(qrels: Mapping, threshold: int, qids: list, docids: list, score: np.ndarray):
    """Run columns as read from a file: ``str``, or ``bytes`` from the fast reader (compared bytewise,
    which is trec_eval's strcmp order)."""
    judged = _Judged(qrels, threshold)
    as_bytes = bool(qids) and isinstance(qids[0], bytes)
    key = str.encode if as_bytes else str
    rows = {key(q): r for q, r in judged.rows.items()}
    docs = {key(d) for d in judged.docs}
    pairs = {(key(q), key(d)): hit for (q, d), hit in judged.pairs(qrels).items()}
    n = len(qids)
    row = np.fromiter(map(rows.get, qids, repeat(-1)), np.int64, n)
    h = ([], [], [], [])
    for i in np.flatnonzero(np.fromiter(map(docs.__contains__, docids), bool, n)).tolist():
        found = pairs.get((qids[i], docids[i]))
        if found is not None:
            h[0].append(found[0]), h[1].append(float(score[i])), h[2].append(found[1]), h[3].append(docids[i])
    by_row: list = []

    def tied(r: int, value: float) -> list:
        if not by_row:  # entries grouped by question, built on the first tie
            order = np.argsort(row, kind="stable")
            counts = np.bincount(row[row >= 0], minlength=len(judged.question_ids))
            by_row.extend([order, np.searchsorted(row[order], 0) + np.cumsum(counts) - counts, counts])
        order, starts, counts = by_row
        return [docids[i] for i in order[starts[r] : starts[r] + counts[r]].tolist() if score[i] == value]

    run_qids = {q.decode() for q in set(qids)} if as_bytes else qids
    return _assemble(judged, row, score, _hits(*h), tied), judged.labels(judged.run_only(run_qids))


def _grouped(qrels: TrecQrels) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for q, d, g in zip(qrels.qid, qrels.docid, qrels.grade.tolist()):
        out.setdefault(q, {})[d] = g
    return out


def trec_inputs(qrels: TrecQrels, run: TrecRun, threshold: int = 1) -> tuple[np.ndarray, Labels]:
    """The run as a ``(questions, depth)`` matrix of judged-document indices, and its labels.

    Args:
        qrels: judgments as read from a qrels file.
        run: a run as read from a run file.
        threshold: the lowest grade that counts as relevant.

    Returns:
        What :func:`sweep.metrics.evaluate` takes.

    Example:
        >>> m, labels = trec_inputs(TrecQrels(["q"], ["a"], np.array([1])), TrecRun(["q"], ["a"], np.array([1.0])))
    """
    return _from_columns(_grouped(qrels), threshold, run.qid, run.docid, run.score)


def _qrels(qrels: QrelsInput) -> dict[str, dict[str, int]]:
    if isinstance(qrels, (str, Path)):
        return _grouped(read_qrels(qrels))
    if not any(qrels.values()):
        raise DataError([Problem("qrels", "no judgments: the qrels are empty")])
    if not all(
        isinstance(g, (int, np.integer)) and not isinstance(g, bool)
        for d in qrels.values()
        for g in d.values()
    ):
        raise DataError([Problem("qrels", "grades must be integers, as in {question: {document: 1}}")])
    return qrels


def _ranked(run: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Lists are rankings: their order is kept exactly (scores -1, -2, ...), so no tie rule can move it."""
    out = {}
    for q, docs in run.items():
        out[q] = {d: -float(i) for i, d in enumerate(docs, 1)}
        if len(out[q]) != len(docs):
            raise DataError([Problem("run", "a document is listed twice for one question")])
    return out


def score(
    qrels: QrelsInput, run: RunInput, metrics: Sequence[str] | None = None, threshold: int = 1
) -> Scores:
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
    judgments = _qrels(qrels)
    if isinstance(run, (str, Path)):
        matrix, labels = _from_columns(judgments, threshold, *read_run_columns(run))
    elif all(isinstance(docs, Mapping) for docs in run.values()):
        matrix, labels = _from_dicts(judgments, run, threshold)
    elif all(isinstance(docs, Sequence) and not isinstance(docs, str) for docs in run.values()):
        matrix, labels = _from_dicts(judgments, _ranked(run), threshold)
    else:
        raise DataError(
            [Problem("run", "give every question a {document: score} dict, or every question a list")]
        )
    return evaluate(matrix, labels, list(metrics) if metrics else None)


__all__ = ["QrelsInput", "RunInput", "score", "trec_inputs"]
