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

from ..errors import DataError, Problem
from .model import Document, EvalSet, Evidence, Question


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


def assemble(
    name: str,
    documents: list[tuple[Document, Where]],
    questions: list[RawQuestion],
    parse_problems: list[Problem],
    *,
    lenient: bool = False,
) -> EvalSet:
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
    dropped: list[str] = [f"document {d}" for d in sorted(bad_docs)]
    for raw in questions:
        q, where = raw.question, raw.where
        found = _check_question(raw, docs, bad_docs, seen)
        seen.add(q.id)
        if found:
            problems.extend(Problem(where.file, msg, where.line, fld) for fld, msg in found[0])
            dropped.append(f"question {q.id}: {found[0][0][1]}")
            continue
        kept.append(replace(q, evidence=_locate_quotes(raw, docs)))

    if problems and not lenient:
        raise DataError(problems)
    documents_out = [d for d in docs.values() if d.id not in bad_docs]
    return EvalSet(name, documents_out, kept, dropped if problems else [])


def _check_question(
    raw: RawQuestion, docs: dict[str, Document], bad_docs: set[str], seen: set[str]
) -> list[list[tuple[str, str]]]:
    q = raw.question
    found: list[tuple[str, str]] = []
    if q.id in seen:
        found.append(("id", f"duplicate question id {q.id!r}"))
    if not q.text.strip():
        found.append(("text", f"question {q.id!r} has empty text"))
    for i, ev in enumerate(q.evidence):
        fld = f"evidence[{i}]"
        doc = docs.get(ev.doc_id)
        if doc is None:
            found.append((fld, f"question {q.id!r} cites unknown document {ev.doc_id!r}"))
            continue
        if ev.doc_id in bad_docs:
            found.append((fld, f"question {q.id!r} cites invalid document {ev.doc_id!r}"))
            continue
        quote = raw.quotes.get(i)
        if ev.start is None:
            if quote is not None and doc.text.find(quote) < 0:
                found.append((fld, f"quoted text {_short(quote)} not found in document {ev.doc_id!r}"))
            continue
        assert ev.end is not None
        if not (0 <= ev.start < ev.end <= len(doc.text)):
            found.append(
                (fld, f"span [{ev.start}, {ev.end}) is outside document {ev.doc_id!r} (length {len(doc.text)})")
            )
        elif quote is not None and doc.text[ev.start : ev.end] != quote:
            found.append(
                (
                    fld,
                    f"span [{ev.start}, {ev.end}) of {ev.doc_id!r} reads {_short(doc.text[ev.start:ev.end])}, "
                    f"not the quoted {_short(quote)}",
                )
            )
    return [found] if found else []


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
