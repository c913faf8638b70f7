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
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import itemgetter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sweep.errors import DataError, Problem
from sweep.labels import Labels, document_labels
from sweep.metrics.evaluate import Scores, evaluate_entries
from sweep.metrics.gains import find_sorted
from sweep.metrics.runfiles import TrecQrels, TrecRun, qrels_columns, run_columns

QrelsInput = Mapping[str, Mapping[str, int]] | str | Path
RunInput = Mapping[str, Mapping[str, float]] | Mapping[str, Sequence[str]] | str | Path
BLOCK = 8192  # judged documents compared with their question's scores at once (bounded memory)


class _Judged:
    """The judgments of the questions that have a relevant one, as labels over the judged documents.

    Built from columns in a few vectorised passes, whatever the source: the questions (``names``, in
    order of first appearance, and each judgment's ``code`` into them), Arrow docids, int64 grades.
    """

    def __init__(
        self, names: list[str], code: np.ndarray, docid: pa.Array, grade: np.ndarray, threshold: int
    ):
        best = np.full(len(names), np.iinfo(np.int64).min)
        np.maximum.at(best, code, grade)
        kept = best >= threshold
        self.question_ids = [q for q, k in zip(names, kept.tolist()) if k]
        self.skipped = [q for q, k in zip(names, kept.tolist()) if not k]
        self.rows = dict(zip(self.question_ids, range(len(self.question_ids))))
        row_of = np.where(kept, np.cumsum(kept) - 1, -1)
        is_item = kept[code] & (grade >= 0)  # grade 0: judged, not relevant; below 0: not judged (trec_eval)
        self.item_docid = docid.filter(pa.array(is_item))
        docs = pc.dictionary_encode(self.item_docid)
        self.doc_names = docs.dictionary  # judged document -> index; the next index is "not judged"
        self.item = (row_of[code[is_item]], docs.indices.to_numpy().astype(np.int64), grade[is_item])
        self.threshold = threshold
        keys = self.item[0] * (len(self.doc_names) + 1) + self.item[1]
        self._order = np.argsort(keys, kind="stable")
        self._keys = keys[self._order]

    def find(self, qid: pa.Array, docid: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every run entry's question row (-1: none), and the entries that are items with their item
        numbers (one hash lookup per column)."""
        row = pc.fill_null(pc.index_in(qid, value_set=pa.array(self.question_ids, pa.string())), -1)
        doc = pc.fill_null(pc.index_in(docid, value_set=self.doc_names), -1)
        row, doc = row.to_numpy().astype(np.int64), doc.to_numpy().astype(np.int64)
        candidate = np.flatnonzero((row >= 0) & (doc >= 0))
        key = row[candidate] * (len(self.doc_names) + 1) + doc[candidate]
        found, at = find_sorted(self._keys, key)
        return row, candidate[found], self._order[at[found]]

    def run_only(self, qids) -> list[str]:
        """Questions of the run that the qrels do not have: skipped and listed, as trec_eval does."""
        known = set(self.rows).union(self.skipped)
        return sorted(set(qids).difference(known))

    def labels(self, run_only: list[str]) -> Labels:
        n_docs = len(self.doc_names) + 1
        return document_labels(self.question_ids, *self.item, n_docs, self.threshold, self.skipped + run_only)


@dataclass
class _Ranked:
    """Where the judged documents rank (0-based, trec_eval's order), and each question's run length."""

    counts: np.ndarray
    depth: int
    rows: np.ndarray
    ranks: np.ndarray
    docs: np.ndarray

    def matrix(self, not_judged: int) -> np.ndarray:
        """The ``(questions, depth)`` matrix: judged documents at their rank, the rest ``not_judged``."""
        matrix = np.where(np.arange(self.depth)[None, :] < self.counts[:, None], not_judged, -1)
        matrix[self.rows, self.ranks] = self.docs
        return matrix


def _rank(judged: _Judged, row: np.ndarray, score: np.ndarray, hits: tuple, tied: Callable) -> _Ranked:
    """The trec_eval rank of every judged entry: the entries of its question scored higher, plus, on
    a tie, those with a larger docid.

    ``row``/``score``: every run entry's question row (-1: not scored) and score; ``hits``: the judged
    entries' (row, score, document index, docid); ``tied(row, score)``: the docids of a question's
    entries with exactly that score (asked only on ties).
    """
    n_rows = len(judged.question_ids)
    keep = row >= 0
    r, s = (row, score) if keep.all() else (row[keep], score[keep])
    counts = np.bincount(r, minlength=n_rows)
    depth = max(int(counts.max(initial=0)), 1)
    in_order = not len(r) or bool(np.all(r[1:] >= r[:-1]))
    if in_order and len(r) == n_rows * depth:  # every question, same depth, in order: a reshape
        scores = s.reshape(n_rows, depth)
    else:
        if not in_order:
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
    return _Ranked(counts, depth, h_row, rank, h_doc)


def _from_dicts(judged: _Judged, run: Mapping[str, Mapping[str, float]]):
    values = list(run.values())
    plain = set(map(type, values)) == {dict}  # else other Mappings, copied once into dicts
    if not plain:
        values = [d if type(d) is dict else dict(d) for d in values]
    lens = np.fromiter(map(len, values), np.int64, len(values))
    try:
        score = np.fromiter(chain.from_iterable(map(dict.values, values)), np.float64, int(lens.sum()))
    except (TypeError, ValueError):
        raise DataError(
            [Problem("run", "scores must be numbers, as in {question: {document: 0.7}}")]
        ) from None
    if not np.isfinite(score).all():
        raise DataError([Problem("run", "a score is NaN or infinite: the ranking would be arbitrary")])
    row = np.repeat(np.fromiter(map(judged.rows.get, run, repeat(-1)), np.int64, len(run)), lens)
    # each item looked up in its question's dict: as many lookups as judgments, not as run entries
    by_question = run if plain else dict(zip(run, values))
    per_row = list(map(by_question.get, judged.question_ids, repeat({})))
    n_items = len(judged.item[0])
    found = (
        itemgetter(*judged.item[0].tolist())(per_row) if n_items > 1 else [per_row[r] for r in judged.item[0]]
    )
    value = np.fromiter(
        map(dict.get, found, judged.item_docid.to_pylist(), repeat(np.nan)), np.float64, n_items
    )
    item = np.flatnonzero(~np.isnan(value))
    docids = judged.item_docid.take(pa.array(item)).to_pylist()
    hits = (judged.item[0][item], value[item], judged.item[1][item], docids)

    def tied(r: int, value: float) -> list[str]:
        return [d for d, v in run[judged.question_ids[r]].items() if v == value]

    run_only = judged.run_only(compress(run, lens))
    return _rank(judged, row, score, hits, tied), judged.labels(run_only)


def _from_columns(judged: _Judged, qid: pa.Array, docid: pa.Array, score: np.ndarray):
    """Run columns as read from a file (Arrow strings; compared as ``str``: code-point order is UTF-8
    byte order, trec_eval's strcmp)."""
    row, entry, item = judged.find(qid, docid)
    hits = (row[entry], score[entry], judged.item[1][item], docid.take(pa.array(entry)).to_pylist())
    by_row: list = []

    def tied(r: int, value: float) -> list:
        if not by_row:  # entries grouped by question, built on the first tie
            order = np.argsort(row, kind="stable")
            counts = np.bincount(row[row >= 0], minlength=len(judged.question_ids))
            by_row.extend([order, np.searchsorted(row[order], 0) + np.cumsum(counts) - counts, counts])
        order, starts, counts = by_row
        mine = order[starts[r] : starts[r] + counts[r]]
        return docid.take(pa.array(mine[score[mine] == value])).to_pylist()

    run_only = judged.run_only(pc.unique(qid).to_pylist())
    return _rank(judged, row, score, hits, tied), judged.labels(run_only)


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
    names, code = _encoded(pa.array(qrels.qid, pa.string()))
    judged = _Judged(names, code, pa.array(qrels.docid, pa.string()), qrels.grade, threshold)
    qid, docid = pa.array(run.qid, pa.string()), pa.array(run.docid, pa.string())
    ranked, labels = _from_columns(judged, qid, docid, run.score)
    return ranked.matrix(len(judged.doc_names)), labels


def _encoded(qid: pa.Array) -> tuple[list[str], np.ndarray]:
    """Distinct question ids in order of first appearance, and each entry's index into them (a qrels
    file's qids come encoded: :func:`qrels_columns` did it for its duplicate check)."""
    questions = qid if pa.types.is_dictionary(qid.type) else pc.dictionary_encode(qid)
    return questions.dictionary.to_pylist(), questions.indices.to_numpy().astype(np.int64)


def _judgments(qrels: QrelsInput) -> tuple[list[str], np.ndarray, pa.Array, np.ndarray]:
    """Qrels from a file or a dict, as the columns :class:`_Judged` takes."""
    if isinstance(qrels, (str, Path)):
        qid, docid, grade = qrels_columns(qrels)
        return *_encoded(qid), docid, grade
    if not any(qrels.values()):
        raise DataError([Problem("qrels", "no judgments: the qrels are empty")])
    judgments = [d if type(d) is dict else dict(d) for d in qrels.values()]
    grades = list(chain.from_iterable(map(dict.values, judgments)))
    if not all(issubclass(t, (int, np.integer)) and t is not bool for t in set(map(type, grades))):
        raise DataError([Problem("qrels", "grades must be integers, as in {question: {document: 1}}")])
    lens = np.fromiter(map(len, judgments), np.int64, len(judgments))
    names = list(compress(qrels, lens))  # a question with no judgments is not one
    code = np.repeat(np.arange(len(names)), lens[lens > 0])
    docid = pa.array(list(chain.from_iterable(judgments)), pa.string())
    return names, code, docid, np.array(grades, dtype=np.int64)


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
    judged = _Judged(*_judgments(qrels), threshold)
    if isinstance(run, (str, Path)):
        ranked, labels = _from_columns(judged, *run_columns(run))
    elif all(issubclass(t, Mapping) for t in set(map(type, run.values()))):
        ranked, labels = _from_dicts(judged, run)
    elif all(issubclass(t, Sequence) and not issubclass(t, str) for t in set(map(type, run.values()))):
        ranked, labels = _from_dicts(judged, _ranked(run))
    else:
        raise DataError(
            [Problem("run", "give every question a {document: score} dict, or every question a list")]
        )
    return evaluate_entries(
        labels, ranked.rows, ranked.ranks, ranked.docs, ranked.depth, list(metrics) if metrics else None
    )


__all__ = ["QrelsInput", "RunInput", "score", "trec_inputs"]
