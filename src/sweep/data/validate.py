"""Cross-checks between documents and questions, shared by every loader.

Loaders parse their own formats and hand over items tagged with where they
came from; this module checks what only the whole set can show (duplicate
ids, evidence for unknown documents, spans outside their document, quotes
that do not match) and either raises one :class:`DataError` listing every
problem (strict, the default) or drops the offending items and records them
(lenient).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sweep.data.model import Document, EvalSet, Evidence, Question
from sweep.errors import DataError, Problem


@dataclass(frozen=True)
class Where:
    file: str
    line: int | None = None


@dataclass
class RawQuestion:
    """A parsed question before cross-checks; quotes may still need locating."""

    question: Question
    where: Where
    quotes: dict[int, str] = field(default_factory=dict)  # evidence index -> quoted text
    evidence_where: dict[int, Where] = field(
        default_factory=dict
    )  # where an item was written, if not `where`


def assemble(
    name: str,
    documents: list[tuple[Document, Where]],
    questions: list[RawQuestion],
    parse_problems: list[Problem],
    *,
    lenient: bool = False,
) -> EvalSet:
    """Cross-check documents and questions; strict: one DataError listing every problem.

    Args:
        name: the eval set's name, for reports.
        documents: parsed documents with where each was read.
        questions: parsed questions (quotes not yet located).
        parse_problems: what the loader already found.
        lenient: drop bad items (each listed in ``EvalSet.dropped``) instead of failing.

    Returns:
        The validated :class:`EvalSet`.
    """
    problems = list(parse_problems)
    bad_docs: set[str] = set()
    docs: dict[str, Document] = {}
    for doc, where in documents:
        if doc.id in docs:
            problems.append(Problem(where.file, f"duplicate document id {doc.id!r}", where.line, "id"))
            bad_docs.add(doc.id)
            continue
        if not doc.text.strip():
            problems.append(Problem(where.file, f"document {doc.id!r} has empty text", where.line, "text"))
            bad_docs.add(doc.id)
        docs[doc.id] = doc

    kept: list[Question] = []
    seen: set[str] = set()
    dropped: list[str] = [  # never parsed at all: a line of a file, or a whole file
        f"line {p.file}:{p.line}: {p.message}" if p.line is not None else f"file {p.file}: {p.message}"
        for p in parse_problems
    ]
    dropped += [f"document {d}" for d in sorted(bad_docs)]
    for raw in questions:
        q, where = raw.question, raw.where
        found = _check_question(raw, docs, bad_docs, seen)
        seen.add(q.id)
        if found:
            for i, fld, msg in found:
                at = raw.evidence_where.get(i, where) if i is not None else where
                problems.append(Problem(at.file, msg, at.line, fld if at is where else None))
            dropped.append(f"question {q.id} ({where.file}:{where.line}): {found[0][2]}")
            continue
        kept.append(replace(q, evidence=_locate_quotes(raw, docs)))

    if problems and not lenient:
        raise DataError(problems, hint=STRICT_HINT)
    documents_out = [d for d in docs.values() if d.id not in bad_docs]
    return EvalSet(name, documents_out, kept, dropped if problems else [])


STRICT_HINT = (
    "fix or remove those lines, or pass --lenient (in a config: dataset.lenient: true) to drop what they "
    "belong to (each drop is listed)"
)


def merge_overlapping_evidence(eval_set: EvalSet) -> EvalSet:
    """The eval set with each question's overlapping spans merged (see :func:`merge_overlapping`).

    Args:
        eval_set: a validated eval set.

    Returns:
        The same set; ``merged_evidence`` counts the items merged away.

    Example:
        >>> merge_overlapping_evidence(eval_set).merged_evidence  # doctest: +SKIP
        3
    """
    questions, total = [], 0
    for q in eval_set.questions:
        evidence, n = merge_overlapping(q.evidence)
        questions.append(replace(q, evidence=evidence) if n else q)
        total += n
    return EvalSet(
        eval_set.name, eval_set.documents, questions, list(eval_set.dropped), eval_set.merged_evidence + total
    )


def merge_overlapping(evidence: tuple[Evidence, ...]) -> tuple[tuple[Evidence, ...], int]:
    """Overlapping spans of one document become one item over their union, at the highest grade.

    Two copies of one answer would otherwise count as two relevant items: a perfect first chunk
    then scores NDCG@10 0.61 instead of 1. Returns (items, how many were merged away).
    """
    by_doc: dict[str, list[Evidence]] = {}
    for ev in evidence:
        by_doc.setdefault(ev.doc_id, []).append(ev)
    out, merged = [], 0
    for doc_id, items in by_doc.items():
        whole = [e for e in items if e.start is None]
        spans = sorted((e for e in items if e.start is not None), key=lambda e: (e.start, e.end))
        out += whole
        current: Evidence | None = None
        for ev in spans:
            if current is not None and ev.start < current.end:
                current = Evidence(
                    doc_id, max(current.grade, ev.grade), current.start, max(current.end, ev.end)
                )
                merged += 1
            else:
                if current is not None:
                    out.append(current)
                current = ev
        if current is not None:
            out.append(current)
    return tuple(out), merged


def _check_question(
    raw: RawQuestion, docs: dict[str, Document], bad_docs: set[str], seen: set[str]
) -> list[tuple[int | None, str, str]]:
    """(evidence index or None, field, message) for each problem of one question."""
    q = raw.question
    found: list[tuple[int | None, str, str]] = []
    if q.id in seen:
        found.append((None, "id", f"duplicate question id {q.id!r}"))
    if not q.text.strip():
        found.append((None, "text", f"question {q.id!r} has empty text"))
    items_seen: dict[tuple, int] = {}
    for i, ev in enumerate(q.evidence):
        fld = f"evidence[{i}]"
        same = (ev.doc_id, ev.start, ev.end, raw.quotes.get(i) if ev.start is None else None)
        if same in items_seen:
            found.append(
                (
                    i,
                    fld,
                    f"question {q.id!r}: evidence[{i}] repeats evidence[{items_seen[same]}] "
                    f"(same document {ev.doc_id!r} and span); keep one",
                )
            )
            continue
        items_seen[same] = i
        doc = docs.get(ev.doc_id)
        if doc is None:
            found.append((i, fld, f"question {q.id!r} cites unknown document {ev.doc_id!r}"))
            continue
        if ev.doc_id in bad_docs:
            found.append((i, fld, f"question {q.id!r} cites invalid document {ev.doc_id!r}"))
            continue
        quote = raw.quotes.get(i)
        if ev.start is None:
            if quote is not None and doc.text.find(quote) < 0:
                found.append((i, fld, f"quoted text {_short(quote)} not found in document {ev.doc_id!r}"))
            continue
        assert ev.end is not None
        if not (0 <= ev.start < ev.end <= len(doc.text)):
            found.append(
                (
                    i,
                    fld,
                    f"span [{ev.start}, {ev.end}) is outside document {ev.doc_id!r} (length {len(doc.text)})",
                )
            )
        elif quote is not None and doc.text[ev.start : ev.end] != quote:
            found.append(
                (
                    i,
                    fld,
                    f"span [{ev.start}, {ev.end}) of {ev.doc_id!r} reads {_short(doc.text[ev.start : ev.end])}, "
                    f"not the quoted {_short(quote)}",
                )
            )
    return found


def _locate_quotes(raw: RawQuestion, docs: dict[str, Document]) -> tuple[Evidence, ...]:
    """Give quote-only evidence its span: the quote's first occurrence in the document."""
    out = []
    for i, ev in enumerate(raw.question.evidence):
        quote = raw.quotes.get(i)
        if ev.start is None and quote is not None:
            start = docs[ev.doc_id].text.find(quote)
            ev = replace(ev, start=start, end=start + len(quote))
        out.append(ev)
    return tuple(out)


def _short(text: str, n: int = 60) -> str:
    return repr(text if len(text) <= n else text[: n - 3] + "...")
