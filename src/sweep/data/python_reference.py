"""The bundled example eval set: the Python language reference that ships with CPython.

The corpus is ``pydoc_data.topics`` (79 topics, about 465,000 characters),
read from the running interpreter, never copied into the repository. The
questions (``sweep/examples/python_reference_questions.jsonl``) were written
by us; their evidence is quoted text located by exact match at load time, so
the labels survive Python versions. A quote the running Python's text no
longer contains is reported and its question skipped.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from sweep.data.jsonl import parse_questions
from sweep.data.model import Document, EvalSet
from sweep.data.validate import Where, assemble

BUNDLED_QUESTIONS = resources.files("sweep") / "examples" / "python_reference_questions.jsonl"


def python_reference_documents() -> list[Document]:
    from pydoc_data.topics import topics

    docs = []
    for name in sorted(topics):
        text = topics[name]
        title = text.split("\n", 1)[0].strip() or name
        docs.append(Document(name, text, title, {"topic": name}))
    return docs


def load_python_reference(questions: str | Path | None = None) -> EvalSet:
    path = Path(str(questions or BUNDLED_QUESTIONS))
    problems: list = []
    documents = [(d, Where("pydoc_data.topics")) for d in python_reference_documents()]
    raw = list(parse_questions(path, problems))
    return assemble("python-reference", documents, raw, problems, lenient=True)
