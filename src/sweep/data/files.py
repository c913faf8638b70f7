"""A corpus from a folder of files: Markdown, plain text, reStructuredText, HTML and PDF.

Each file is one document: its id is the path relative to the folder (``guides/setup.md``), its title
the front matter's ``title``, else its first heading, else the file name; its metadata is the YAML
front matter plus ``folder`` (the relative folder, ``""`` at the top), so ``filters:`` can select
by either. HTML is read with a real parser (``html.parser``): script, style and template contents
are dropped, block elements become line breaks (:mod:`sweep.data.formats`). A file that cannot be
read is reported by path; none is skipped silently.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sweep.data.formats import SUFFIXES, Unreadable, read_document
from sweep.data.jsonl import parse_questions
from sweep.data.model import Document, EvalSet, Question
from sweep.data.validate import RawQuestion, Where, assemble
from sweep.errors import DataError, Problem
from sweep.logs import logger
from sweep.textfile import read_text


def load_files(
    folder: str | Path, questions: str | Path | None = None, *, pattern: str = "**/*", lenient: bool = False
) -> EvalSet:
    """An eval set whose corpus is a folder of files, with questions that may have no evidence yet.

    Args:
        folder: the corpus folder (read recursively with the default ``pattern``).
        questions: a JSONL file in the native question format, or a CSV with a ``question`` (or
            ``text``) column and optional ``id`` and ``split`` columns; None: no questions yet.
        pattern: which files, as a glob relative to ``folder``.
        lenient: leave out files and questions with problems (each listed) instead of failing.

    Returns:
        The :class:`EvalSet`; document ids are relative paths.

    Raises:
        DataError: every file and question line with a problem, by path (strict).

    Example:
        >>> s = load_files("docs", "questions.csv")  # doctest: +SKIP
        >>> s.documents[0].id, s.documents[0].metadata["folder"]
        ('guides/setup.md', 'guides')
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(Problem(str(folder), "not a folder: point dataset.path at the folder of documents"))
    problems: list[Problem] = []
    documents = read_documents(folder, pattern, problems)
    raw: list[RawQuestion] = []
    if questions is not None:
        path = Path(questions)
        raw = list(
            _csv_questions(path, problems)
            if path.suffix.lower() == ".csv"
            else parse_questions(path, problems)
        )
    return assemble(folder.name, documents, raw, problems, lenient=lenient)


def _csv_questions(path: Path, problems: list[Problem]):
    """Questions from a CSV: ``question`` or ``text`` (required), ``id`` (default q1, q2, ...), ``split``."""
    with io.StringIO(read_text(path), newline="") as fh:
        reader = csv.DictReader(fh)
        columns = reader.fieldnames or []
        text_column = next((c for c in ("question", "text") if c in columns), None)
        if text_column is None:
            raise DataError(Problem(str(path), "needs a 'question' (or 'text') column", 1))
        for n, row in enumerate(reader, start=2):
            text = (row.get(text_column) or "").strip()
            if not text:
                problems.append(Problem(str(path), "empty question", n, text_column))
                continue
            qid = (row.get("id") or "").strip() or f"q{n - 1}"
            question = Question(qid, text, (), split=(row.get("split") or "").strip() or None)
            yield RawQuestion(question, Where(str(path), n))


def find_files(folder: Path, pattern: str = "**/*") -> list[Path]:
    """The readable files under ``folder`` matching ``pattern``, in a stable (sorted) order.

    Args:
        folder: the corpus folder.
        pattern: a glob relative to it; ``**`` recurses.

    Returns:
        Paths with a known suffix (``.md .markdown .txt .rst .html .htm .pdf``); hidden files and
        folders (a name starting with ``.``) are left out.

    Example:
        >>> find_files(Path("docs"), "**/*.md")  # doctest: +SKIP
        [PosixPath('docs/index.md'), PosixPath('docs/guides/setup.md')]
    """
    found, other = [], []
    for path in folder.glob(pattern):
        relative = path.relative_to(folder)
        if not path.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        (found if path.suffix.lower() in SUFFIXES else other).append(relative.as_posix())
    if other:  # said, not silently skipped
        other.sort()
        more = f" (+{len(other) - 5} more)" if len(other) > 5 else ""
        logger.info(
            "%s: not read, not %s: %s%s", folder, " ".join(sorted(SUFFIXES)), ", ".join(other[:5]), more
        )
    return [folder / p for p in sorted(found)]


def read_documents(folder: Path, pattern: str, problems: list[Problem]) -> list[tuple[Document, Where]]:
    """Every matching file as a document; a file that fails is a problem naming its path.

    Args:
        folder: the corpus folder.
        pattern: a glob relative to it.
        problems: where unreadable files are recorded.

    Returns:
        ``(document, where)`` pairs for :func:`sweep.data.validate.assemble`.

    Example:
        >>> docs = read_documents(Path("docs"), "**/*", problems := [])  # doctest: +SKIP
    """
    paths = find_files(folder, pattern)
    if not paths:
        problems.append(Problem(str(folder), f"no {', '.join(sorted(SUFFIXES))} file matches {pattern!r}"))
    out = []
    for path in paths:
        try:
            out.append((read_document(path, folder), Where(str(path))))
        except Unreadable as e:
            problems.append(Problem(str(path), str(e)))
    return out


__all__ = ["find_files", "load_files", "read_documents"]
