"""A labelling session on disk: an append-only log, and the eval set rewritten whole from it.

``log.jsonl`` is the truth: each question added or edited, each judgment made or removed, is one
line, written and fsynced before the page is told "saved", so a SIGKILL loses nothing the page
showed as saved. ``questions.jsonl`` (the native format, spans with their quotes; passages judged
not relevant as grade 0) is rebuilt from the log after every change, atomically (a temporary file
renamed over it), and again on start, so it never lags the log for long and is never half-written.
Beside it ``corpus.jsonl`` keeps the texts the spans point into, so the folder is a native eval set.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.data.model import Document, Question
from sweep.errors import DataError, Problem
from sweep.textfile import write_whole

DEFAULT_JUDGE = "you"  # a session judged by one person names nobody
DRAFT_JUDGE = "llm draft"  # grades an LLM drafted: shown for agreement, never in the eval set


@dataclass
class Judgment:
    """One graded span of one document for one question; grade 0: judged not relevant."""

    id: int
    question: str
    doc_id: str
    start: int
    end: int
    grade: int
    judge: str = DEFAULT_JUDGE


@dataclass
class SessionState:
    """What the log says: the questions (in order) and their live judgments."""

    questions: dict[str, str] = field(default_factory=dict)  # id -> text
    judgments: dict[int, Judgment] = field(default_factory=dict)
    next_id: int = 1
    drafted: set[str] = field(default_factory=set)  # questions accepted from an LLM draft
    draft_grades: dict[tuple, int] = field(default_factory=dict)  # (question, doc, start, end) -> LLM's grade


class JudgmentStore:
    """The session folder: ``log.jsonl`` (append-only) and ``questions.jsonl`` (rebuilt from it).

    Args:
        folder: where the session lives; created if missing.
        documents: the corpus, to check spans and quote them.
        questions: the questions to start from (their existing evidence is kept as judgments once).
        grades: the allowed grades (the scale).
        judge: who judges in this session (recorded on each judgment, for agreement between judges).

    Example:
        >>> store = JudgmentStore(Path("labels/docs"), eval_set.documents, eval_set.questions)  # doctest: +SKIP
        >>> store.judge("q1", "guide.md", 10, 42, 2).id
        1
    """

    def __init__(
        self,
        folder: Path,
        documents: list[Document],
        questions: list[Question] = (),
        grades: tuple[int, ...] = (0, 1, 2),
        judge: str = DEFAULT_JUDGE,
    ):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.log_path = self.folder / "log.jsonl"
        self.out_path = self.folder / "questions.jsonl"
        self.corpus_path = self.folder / "corpus.jsonl"  # the texts the spans point into: a native eval set
        self.documents = {d.id: d for d in documents}
        self.grades = tuple(grades)
        self.judge_name = judge
        self._lock = threading.Lock()
        fresh = not self.log_path.exists()
        self.state = self._replay()
        if fresh:  # the questions we start from, and what they were already labelled with
            for q in questions:
                self._append({"kind": "question", "id": q.id, "text": q.text})
                for e in q.evidence:
                    doc = self.documents.get(e.doc_id)
                    if doc is not None:
                        start, end = e.span(len(doc.text))
                        self._append(self._judgment_line(q.id, e.doc_id, start, end, e.grade))
        self._check_judged_texts()
        self._write_lines(self.corpus_path, [_document_line(d) for d in documents])
        self._write_questions()

    def _check_judged_texts(self) -> None:
        """A judged document whose text changed since: its spans would point at other words."""
        if not self.corpus_path.exists():
            return
        before = {}
        for line in self.corpus_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                before[d["id"]] = d["text"]
        judged = {j.doc_id for j in self.state.judgments.values()}
        changed = sorted(
            d
            for d in judged
            if d in before and (d not in self.documents or self.documents[d].text != before[d])
        )
        if changed:
            raise DataError(
                Problem(
                    str(self.corpus_path),
                    f"judged document(s) changed or gone since they were judged: {', '.join(changed[:5])}; "
                    "their spans point at the old text kept here: restore the files, or start a new session "
                    "(--out) and judge them again",
                )
            )

    # -- changes (each one line of the log, durable before it returns) -------------------------
    def add_question(self, text: str, qid: str | None = None, drafted: bool = False) -> str:
        """Add a question, or edit the text of ``qid``; ``drafted``: accepted from an LLM draft."""
        text = " ".join(text.split())
        if not text:
            raise ValueError("a question needs some text")
        with self._lock:
            qid = qid or self._new_question_id()
            self._append(
                {"kind": "question", "id": qid, "text": text} | ({"drafted": True} if drafted else {})
            )
            self._write_questions()
        return qid

    def judge(self, question: str, doc_id: str, start: int, end: int, grade: int) -> Judgment:
        """Record a graded span (grade 0: not relevant); returns the judgment with its id."""
        with self._lock:
            if question not in self.state.questions:
                raise ValueError(f"unknown question {question!r}")
            doc = self.documents.get(doc_id)
            if doc is None:
                raise ValueError(f"unknown document {doc_id!r}")
            if not 0 <= start < end <= len(doc.text):
                raise ValueError(f"span [{start}, {end}) is outside {doc_id!r} ({len(doc.text)} characters)")
            if grade not in self.grades:
                raise ValueError(f"grade {grade} is not on the scale {list(self.grades)}")
            line = self._judgment_line(question, doc_id, start, end, grade)
            self._append(line)
            self._write_questions()
            return self.state.judgments[line["id"]]

    def draft_grade(self, question: str, doc_id: str, start: int, end: int, grade: int) -> None:
        """Record an LLM's grade of a pooled passage: for agreement only, it never enters the eval set."""
        if grade not in self.grades:
            raise ValueError(f"grade {grade} is not on the scale {list(self.grades)}")
        with self._lock:
            line = {"kind": "draft_grade", "question": question, "doc_id": doc_id}
            self._append(line | {"start": int(start), "end": int(end), "grade": int(grade)})

    def remove(self, judgment_id: int) -> None:
        """Take a judgment back."""
        with self._lock:
            if judgment_id not in self.state.judgments:
                raise ValueError(f"no judgment {judgment_id}")
            self._append({"kind": "remove", "id": judgment_id})
            self._write_questions()

    # -- reading ---------------------------------------------------------------------------------
    def judgments_of(self, question: str, judge: str | None = None) -> list[Judgment]:
        """The question's live judgments; ``judge``: only that judge's (each judges blind to the others)."""
        return [
            j
            for j in self.state.judgments.values()
            if j.question == question and (judge is None or j.judge == judge)
        ]

    def _judgment_line(self, question, doc_id, start, end, grade) -> dict[str, Any]:
        line = {"kind": "judgment", "id": self.state.next_id, "question": question, "doc_id": doc_id}
        line |= {"start": int(start), "end": int(end), "grade": int(grade)}
        return line | ({"judge": self.judge_name} if self.judge_name != DEFAULT_JUDGE else {})

    def _new_question_id(self) -> str:
        n = len(self.state.questions) + 1
        while f"new-{n}" in self.state.questions:
            n += 1
        return f"new-{n}"

    def _append(self, line: dict[str, Any]) -> None:
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        _apply(self.state, line)

    def _replay(self) -> SessionState:
        state = SessionState()
        if not self.log_path.exists():
            return state
        data = self.log_path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):  # a line cut by a kill mid-write: never acknowledged, so dropped
            with open(self.log_path, "r+b") as fh:
                fh.truncate(len(complete))
                os.fsync(fh.fileno())
        for n, raw in enumerate(complete.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                _apply(state, json.loads(raw))
            except (ValueError, KeyError, TypeError) as e:
                raise DataError(
                    Problem(str(self.log_path), f"unreadable log line ({e}); fix or remove that line", n)
                ) from None
        return state

    def _write_questions(self) -> None:
        lines = []
        for qid, text in self.state.questions.items():
            evidence = []
            for j in self.judgments_of(qid):
                doc = self.documents[j.doc_id]
                evidence.append(
                    {
                        "doc_id": j.doc_id,
                        "grade": j.grade,
                        "start": j.start,
                        "end": j.end,
                        "quote": doc.text[j.start : j.end],
                    }
                )
            record = {"id": qid, "text": text, "evidence": evidence}
            if qid in self.state.drafted:
                record["metadata"] = {"drafted": True}
            lines.append(json.dumps(record, ensure_ascii=False))
        self._write_lines(self.out_path, lines)

    @staticmethod
    def _write_lines(path: Path, lines: list[str]) -> None:
        write_whole(path, "".join(line + "\n" for line in lines))


def _document_line(d: Document) -> str:
    return json.dumps(
        {"id": d.id, "text": d.text, "title": d.title, "metadata": d.metadata},
        ensure_ascii=False,
        default=str,
    )


def _apply(state: SessionState, line: dict[str, Any]) -> None:
    kind = line["kind"]
    if kind == "question":
        state.questions[str(line["id"])] = str(line["text"])
        if line.get("drafted"):
            state.drafted.add(str(line["id"]))
    elif kind == "judgment":
        j = Judgment(
            int(line["id"]),
            line["question"],
            line["doc_id"],
            line["start"],
            line["end"],
            line["grade"],
            str(line.get("judge", DEFAULT_JUDGE)),
        )
        state.judgments[j.id] = j
        state.next_id = max(state.next_id, j.id + 1)
    elif kind == "draft_grade":
        state.draft_grades[(line["question"], line["doc_id"], line["start"], line["end"])] = int(
            line["grade"]
        )
    elif kind == "remove":
        state.judgments.pop(int(line["id"]), None)
    else:
        raise ValueError(f"unknown kind {kind!r}")


__all__ = ["DEFAULT_JUDGE", "DRAFT_JUDGE", "Judgment", "JudgmentStore", "SessionState"]
