"""Span CSVs in the layout of Chroma's chunking evaluation.

``questions_df.csv`` has columns ``question``, ``references`` (a JSON list of
``{content, start_index, end_index}``: Python string offsets, end exclusive)
and ``corpus_id``; each corpus is one document, the file
``corpora/<corpus_id>.md`` (or ``.txt``) beside the CSV. Every reference must
quote its document exactly.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from sweep.data.jsonl import require_file
from sweep.data.model import Document, EvalSet, Evidence, Question
from sweep.data.validate import RawQuestion, Where, assemble
from sweep.errors import DataError, Problem
from sweep.textfile import read_text

REQUIRED_COLUMNS = ("question", "references", "corpus_id")


def load_span_csv(
    csv_path: str | Path, corpora_dir: str | Path | None = None, *, grade: int = 1, lenient: bool = False
) -> EvalSet:
    csv_path = Path(csv_path)
    corpora = Path(corpora_dir) if corpora_dir else csv_path.parent / "corpora"
    require_file(csv_path)
    problems: list[Problem] = []
    questions: list[RawQuestion] = []
    corpus_ids: dict[str, Where] = {}
    with io.StringIO(read_text(csv_path), newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(Problem(str(csv_path), f"missing column(s) {', '.join(missing)}", 1))
        for row_no, row in enumerate(reader):
            where = Where(str(csv_path), reader.line_num)
            qid = f"q{row_no}"
            corpus_id = (row["corpus_id"] or "").strip()
            corpus_ids.setdefault(corpus_id, where)
            try:
                refs = json.loads(row["references"] or "")
            except json.JSONDecodeError as e:
                problems.append(
                    Problem(where.file, f"references is not valid JSON ({e.msg})", where.line, "references")
                )
                continue
            evidence, quotes, ok = [], {}, isinstance(refs, list)
            for i, ref in enumerate(refs if ok else []):
                if not (isinstance(ref, dict) and {"content", "start_index", "end_index"} <= ref.keys()):
                    ok = False
                    break
                start, end = ref["start_index"], ref["end_index"]
                if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)):
                    ok = False  # 10.7 or "10" would be truncated or guessed: a silently moved span
                    break
                quotes[i] = str(ref["content"])
                evidence.append(Evidence(corpus_id, grade, start, end))
            if not ok:
                problems.append(
                    Problem(
                        where.file,
                        "references must be a list of {content, start_index, end_index} with integer offsets",
                        where.line,
                        "references",
                    )
                )
                continue
            questions.append(
                RawQuestion(Question(qid, row["question"] or "", tuple(evidence)), where, quotes)
            )

    documents = []
    for corpus_id, where in corpus_ids.items():
        path = next(
            (p for p in (corpora / f"{corpus_id}.md", corpora / f"{corpus_id}.txt") if p.is_file()), None
        )
        if path is None:
            problems.append(
                Problem(
                    where.file,
                    f"corpus {corpus_id!r} not found as {corpora}/{corpus_id}.md",
                    where.line,
                    "corpus_id",
                )
            )
            continue
        try:
            documents.append((Document(corpus_id, read_text(path)), Where(str(path))))
        except DataError as e:
            problems.extend(e.problems)
    return assemble(csv_path.parent.name, documents, questions, problems, lenient=lenient)
