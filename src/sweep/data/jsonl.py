"""The native eval-set format: ``corpus.jsonl`` and ``questions.jsonl`` in one folder.

corpus.jsonl, one document a line::

    {"id": "d1", "text": "...", "title": "optional", "metadata": {"lang": "en"}}

questions.jsonl, one question a line::

    {"id": "q1", "text": "...", "split": "test",
     "filters": {"lang": "en"},
     "evidence": [{"doc_id": "d1", "grade": 2},                      # whole document
                  {"doc_id": "d1", "grade": 1, "start": 10, "end": 42},  # [start, end) span
                  {"doc_id": "d1", "grade": 2, "quote": "exact text"}]}  # located at load time

A ``quote`` with ``start``/``end`` is checked against the document; a quote
alone is located at its first occurrence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from sweep.data.model import Document, EvalSet, Evidence, Question
from sweep.data.validate import RawQuestion, Where, assemble
from sweep.errors import DataError, Problem
from sweep.textfile import numbered_lines


def read_jsonl(path: Path, problems: list[Problem]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; bad lines become problems."""
    require_file(path)
    for n, line in numbered_lines(path):
        try:
            obj = json.loads(line, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            problems.append(Problem(str(path), f"invalid JSON ({e.msg} at column {e.colno})", n))
            continue
        except ValueError as e:
            problems.append(Problem(str(path), str(e), n))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(str(path), f"expected a JSON object, got {type(obj).__name__}", n))
            continue
        yield n, obj


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number; write a finite number")


def require_file(path: Path) -> None:
    if not path.is_file():
        raise DataError(Problem(str(path), "file not found (check the dataset path in the config)"))


class Fields:
    """Typed access to one JSON object's fields that records problems instead of raising."""

    def __init__(self, obj: dict[str, Any], where: Where, problems: list[Problem], prefix: str = ""):
        self.obj, self.where, self.problems, self.prefix = obj, where, problems, prefix
        self.ok = True

    def get(
        self, key: str, kind: type | tuple[type, ...], *, required: bool = True, default: Any = None
    ) -> Any:
        if key not in self.obj or self.obj[key] is None:
            if required:
                self.fail(key, "missing required field")
            return default
        value = self.obj[key]
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            self.fail(key, f"expected {names}, got {type(value).__name__} {value!r}"[:200])
            return default
        return value

    def fail(self, key: str, message: str) -> None:
        self.ok = False
        self.problems.append(Problem(self.where.file, message, self.where.line, self.prefix + key))


def parse_evidence(items: Any, fields: Fields) -> tuple[tuple[Evidence, ...], dict[int, str]]:
    if not isinstance(items, list):
        fields.fail("evidence", "expected a list of evidence objects")
        return (), {}
    evidence, quotes = [], {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            fields.fail(f"evidence[{i}]", "expected an object with doc_id and grade")
            continue
        f = Fields(item, fields.where, fields.problems, prefix=f"evidence[{i}].")
        doc_id = f.get("doc_id", str)
        grade = f.get("grade", int)
        start = f.get("start", int, required=False)
        end = f.get("end", int, required=False)
        quote = f.get("quote", str, required=False)
        if grade is not None and grade < 0:
            f.fail("grade", f"grade must be an integer >= 0, got {grade}")
        if (start is None) != (end is None):
            f.fail("start" if start is None else "end", "give both start and end, or neither")
        if not f.ok:
            fields.ok = False
            continue
        if quote is not None:
            quotes[len(evidence)] = quote
        evidence.append(Evidence(doc_id, grade, start, end))
    return tuple(evidence), quotes


def load_native(folder: str | Path, *, lenient: bool = False) -> EvalSet:
    folder = Path(folder)
    problems: list[Problem] = []
    documents = list(_documents(folder / "corpus.jsonl", problems))
    questions = list(parse_questions(folder / "questions.jsonl", problems))
    return assemble(folder.name, documents, questions, problems, lenient=lenient)


def _documents(path: Path, problems: list[Problem]) -> Iterator[tuple[Document, Where]]:
    for n, obj in read_jsonl(path, problems):
        where = Where(str(path), n)
        f = Fields(obj, where, problems)
        doc_id = f.get("id", str)
        text = f.get("text", str)
        title = f.get("title", str, required=False)
        metadata = f.get("metadata", dict, required=False, default={})
        if f.ok:
            yield Document(doc_id, text, title, metadata), where


def parse_questions(path: Path, problems: list[Problem]) -> Iterator[RawQuestion]:
    for n, obj in read_jsonl(path, problems):
        where = Where(str(path), n)
        f = Fields(obj, where, problems)
        qid = f.get("id", str)
        text = f.get("text", str)
        evidence, quotes = parse_evidence(
            f.get("evidence", list, required=False, default=[]), f
        )  # may be unjudged yet
        filters = f.get("filters", dict, required=False, default={})
        split = f.get("split", str, required=False)
        metadata = f.get("metadata", dict, required=False, default={})
        if "rewrites" in obj:  # alternative phrasings, for retrieval.query.transform: multi_query
            rewrites = f.get("rewrites", list, default=[])
            if not all(isinstance(r, str) and r.strip() for r in rewrites):
                f.fail("rewrites", "expected a list of non-empty strings")
            metadata = {**metadata, "rewrites": [r for r in rewrites if isinstance(r, str)]}
        if f.ok:
            yield RawQuestion(Question(qid, text, evidence, filters, split, metadata), where, quotes)
