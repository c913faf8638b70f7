"""Evidence resolved onto a chunk set: which chunk hits which evidence item.

Labels never name chunks (they change with every chunking); they are
re-resolved here for each chunk set. The hit rule: chunk ``[cs, ce)`` hits
evidence span ``[s, e)`` when they overlap and

    overlap / min(span length, chunk length) >= min_overlap

so with the default 0.5 a chunk hits when it covers at least half the span,
or when at least half of the chunk lies inside the span (a long span cut
into many chunks). ``min_overlap = 1`` asks that one holds the other wholly.
A document-level label is a span over the whole document, so every chunk of
that document hits it, and with whole-document chunks the labels are
exactly trec_eval's qrels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sweep.chunking.chunkers import ChunkSet
from sweep.data.model import EvalSet


@dataclass(frozen=True)
class HitRule:
    min_overlap: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.min_overlap <= 1:
            raise ValueError(f"hit rule min_overlap must be in (0, 1], got {self.min_overlap}")


@dataclass
class Labels:
    """Judgements for the answerable questions, as flat integer arrays.

    ``pair_key`` (sorted) is ``question * n_chunks + chunk`` for every
    (question, chunk, item) hit, ``pair_item`` the evidence item it hits.
    Items are numbered globally; ``item_question`` and ``item_grade`` describe
    them. Questions with no evidence at ``grade >= threshold`` are not here:
    they are listed in ``skipped``.

    ``judged_*`` describe every judged item, grade 0 included (judged not relevant): the keys
    (sorted) of the chunks that hit one, the judged item each hits, and per judged item its question
    and whether it is relevant. ``judged@k`` and ``bpref`` read them; the other measures do not.
    """

    question_ids: list[str]
    n_chunks: int
    pair_key: np.ndarray
    pair_item: np.ndarray
    item_question: np.ndarray
    item_grade: np.ndarray
    item_doc: np.ndarray
    item_start: np.ndarray
    item_end: np.ndarray
    threshold: int
    skipped: list[str]
    judged_key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    judged_item: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    judged_question: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    judged_relevant: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    @property
    def n_questions(self) -> int:
        return len(self.question_ids)

    def subset(self, rows: np.ndarray) -> "Labels":
        """The labels of questions ``rows`` (sorted indices), renumbered 0..len(rows)-1."""
        rows = np.asarray(rows, dtype=np.int64)
        new_q = np.full(self.n_questions, -1, dtype=np.int64)
        new_q[rows] = np.arange(len(rows))
        keep_item = new_q[self.item_question] >= 0
        new_item = np.cumsum(keep_item) - 1
        keep_pair = keep_item[self.pair_item]
        chunk = self.pair_key[keep_pair] % self.n_chunks
        key = new_q[self.pair_key[keep_pair] // self.n_chunks] * self.n_chunks + chunk
        order = np.argsort(key, kind="stable")
        keep_judged = new_q[self.judged_question] >= 0
        new_judged = np.cumsum(keep_judged) - 1
        keep_jpair = keep_judged[self.judged_item]
        jkey = new_q[self.judged_key[keep_jpair] // self.n_chunks] * self.n_chunks
        jkey += self.judged_key[keep_jpair] % self.n_chunks
        jorder = np.argsort(jkey, kind="stable")
        return Labels(
            [self.question_ids[i] for i in rows],
            self.n_chunks,
            key[order],
            new_item[self.pair_item[keep_pair]][order],
            new_q[self.item_question[keep_item]],
            self.item_grade[keep_item],
            self.item_doc[keep_item],
            self.item_start[keep_item],
            self.item_end[keep_item],
            self.threshold,
            [],
            jkey[jorder],
            new_judged[self.judged_item[keep_jpair]][jorder],
            new_q[self.judged_question[keep_judged]],
            self.judged_relevant[keep_judged],
        )

    def n_relevant(self) -> np.ndarray:
        """R per question: evidence items at ``grade >= threshold``."""
        rel = self.item_grade >= self.threshold
        return np.bincount(self.item_question[rel], minlength=self.n_questions)

    def n_nonrelevant(self) -> np.ndarray:
        """N per question: judged items below the threshold (grade 0 included), for bpref."""
        nonrel = self.judged_question[~self.judged_relevant]
        return np.bincount(nonrel, minlength=self.n_questions)

    def ideal_gains(self, depth: int) -> np.ndarray:
        """``(questions, depth)`` grades sorted descending: the ideal ranking for IDCG."""
        out = np.zeros((self.n_questions, depth), dtype=np.float64)
        top = int(self.item_grade.max(initial=0)) + 1
        order = np.argsort(self.item_question * top + (top - 1 - self.item_grade), kind="stable")
        q = self.item_question[order]
        starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]]) if len(q) else np.zeros(0, dtype=np.int64)
        slot = np.arange(len(q)) - np.repeat(starts, np.diff(np.r_[starts, len(q)]))
        keep = slot < depth
        out[q[keep], slot[keep]] = self.item_grade[order][keep]
        return out


def resolve_labels(
    eval_set: EvalSet, chunks: ChunkSet, rule: HitRule = HitRule(), threshold: int = 1
) -> Labels:
    answerable, unanswerable = eval_set.answerable(threshold)
    doc_index = eval_set.doc_index
    doc_len = np.array([len(d.text) for d in eval_set.documents], dtype=np.int64)

    # every judged item (grade 0 too: judged not relevant); items, grade 0 kept out: they never gain
    jq, jg, jdoc, jstart, jend = [], [], [], [], []
    for qi, q in enumerate(answerable):
        for ev in q.evidence:
            d = doc_index[ev.doc_id]
            s, e = ev.span(int(doc_len[d]))
            jq.append(qi)
            jg.append(ev.grade)
            jdoc.append(d)
            jstart.append(s)
            jend.append(e)
    arr = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
    judged_q, judged_g, judged_d, judged_s, judged_e = map(arr, (jq, jg, jdoc, jstart, jend))
    gains = judged_g > 0
    item_q, item_g, item_d, item_s, item_e = (
        a[gains] for a in (judged_q, judged_g, judged_d, judged_s, judged_e)
    )

    n_chunks = len(chunks)
    judged_item, judged_chunk = _hits(chunks, judged_d, judged_s, judged_e, rule)
    positive = np.cumsum(gains) - 1  # judged item -> item, where it gains
    keep = gains[judged_item]
    pair_item, pair_chunk = positive[judged_item[keep]], judged_chunk[keep]
    key = item_q[pair_item] * n_chunks + pair_chunk
    order = np.argsort(key, kind="stable")
    jkey = judged_q[judged_item] * n_chunks + judged_chunk
    jorder = np.argsort(jkey, kind="stable")
    return Labels(
        question_ids=[q.id for q in answerable],
        n_chunks=n_chunks,
        pair_key=key[order],
        pair_item=pair_item[order],
        item_question=item_q,
        item_grade=item_g,
        item_doc=item_d,
        item_start=item_s,
        item_end=item_e,
        threshold=threshold,
        skipped=[q.id for q in unanswerable],
        judged_key=jkey[jorder],
        judged_item=judged_item[jorder],
        judged_question=judged_q,
        judged_relevant=judged_g >= threshold,
    )


def _hits(chunks: ChunkSet, item_doc, item_start, item_end, rule: HitRule) -> tuple[np.ndarray, np.ndarray]:
    """All (item, chunk) pairs that satisfy the hit rule."""
    # chunks are grouped by document (chunk_corpus emits them in document order)
    order = np.argsort(chunks.doc, kind="stable")
    doc_sorted = chunks.doc[order]
    lo = np.searchsorted(doc_sorted, item_doc, side="left")
    hi = np.searchsorted(doc_sorted, item_doc, side="right")
    counts = hi - lo
    item = np.repeat(np.arange(len(item_doc)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    chunk = order[np.repeat(lo, counts) + offsets]
    cs, ce = chunks.start[chunk], chunks.end[chunk]
    s, e = item_start[item], item_end[item]
    overlap = np.minimum(ce, e) - np.maximum(cs, s)
    shorter = np.minimum(ce - cs, e - s)
    ok = (overlap > 0) & (overlap >= rule.min_overlap * shorter)
    return item[ok], chunk[ok]


def document_labels(
    question_ids: list[str],
    item_question: np.ndarray,
    item_doc: np.ndarray,
    item_grade: np.ndarray,
    n_docs: int,
    threshold: int = 1,
    skipped: list[str] | None = None,
) -> Labels:
    """Labels where every chunk is a whole document (qrels): item i hits chunk item_doc[i] only.

    Items of grade 0 gain nothing (they are judged, not relevant); negative grades are not
    judgments (trec_eval's "unjudged"); ``question_ids`` must all have a relevant item.
    """
    judged_q, judged_d, judged_g = (
        np.asarray(a, dtype=np.int64) for a in (item_question, item_doc, item_grade)
    )
    judged = judged_g >= 0
    judged_q, judged_d, judged_g = judged_q[judged], judged_d[judged], judged_g[judged]
    jkey = judged_q * n_docs + judged_d
    jorder = np.argsort(jkey, kind="stable")
    pos = item_grade > 0
    item_q, item_d, item_g = (
        np.asarray(a, dtype=np.int64)[pos] for a in (item_question, item_doc, item_grade)
    )
    key = item_q * n_docs + item_d
    order = np.argsort(key, kind="stable")
    return Labels(
        question_ids=list(question_ids),
        n_chunks=n_docs,
        pair_key=key[order],
        pair_item=order.astype(np.int64),
        item_question=item_q,
        item_grade=item_g,
        item_doc=item_d,
        item_start=np.zeros(len(item_q), dtype=np.int64),
        item_end=np.ones(len(item_q), dtype=np.int64),
        threshold=threshold,
        skipped=list(skipped or []),
        judged_key=jkey[jorder],
        judged_item=jorder.astype(np.int64),
        judged_question=judged_q,
        judged_relevant=judged_g >= threshold,
    )
