"""The eval-set model: a corpus of documents and questions with graded evidence.

Evidence points at a document and, optionally, a ``[start, end)`` character
span of its text. It never points at a chunk: chunk ids change whenever the
chunking changes, labels must not (design.md, "Labels that survive
re-chunking").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Evidence:
    """What should be retrieved for a question; no span means the whole document."""

    doc_id: str
    grade: int
    start: int | None = None
    end: int | None = None

    def span(self, document_length: int) -> tuple[int, int]:
        if self.start is None or self.end is None:
            return 0, document_length
        return self.start, self.end


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    evidence: tuple[Evidence, ...]
    filters: dict[str, Any] = field(default_factory=dict)
    split: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def n_relevant(self, threshold: int = 1) -> int:
        return sum(1 for e in self.evidence if e.grade >= threshold)


@dataclass
class EvalSet:
    """Documents and questions that were validated together.

    ``dropped`` lists what a lenient load left out, so a report can say so.
    """

    name: str
    documents: list[Document]
    questions: list[Question]
    dropped: list[str] = field(default_factory=list)
    merged_evidence: int = 0  # overlapping spans merged into one item at load time

    @cached_property
    def doc_index(self) -> dict[str, int]:
        return {d.id: i for i, d in enumerate(self.documents)}

    def with_questions(self, questions: list[Question]) -> "EvalSet":
        return EvalSet(self.name, self.documents, questions, list(self.dropped), self.merged_evidence)

    def answerable(self, threshold: int = 1) -> tuple[list[Question], list[Question]]:
        """Split questions into those with relevant evidence and those without.

        Questions without any evidence at ``grade >= threshold`` cannot be scored
        (every measure is 0/0); they are excluded from means and reported.
        """
        keep = [q for q in self.questions if q.n_relevant(threshold) > 0]
        skip = [q for q in self.questions if q.n_relevant(threshold) == 0]
        return keep, skip

    @cached_property
    def content_hash(self) -> str:
        """A hash of everything that affects results, for cache keys and MLflow tags."""
        h = hashlib.sha256()
        for d in self.documents:
            h.update(f"D\0{d.id}\0{d.title or ''}\0{d.text}\0{sorted(d.metadata.items())}\0".encode())
        for q in self.questions:
            h.update(f"Q\0{q.id}\0{q.text}\0{q.evidence}\0{sorted(q.filters.items())}\0".encode())
        return h.hexdigest()[:16]
