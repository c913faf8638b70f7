"""BEIR folders: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

As in BEIR, only queries that have qrels in the split are kept, and the qrels
are the contract: a qrel for an unknown document or query is an error, not a
silent skip.
"""

from __future__ import annotations

from pathlib import Path

from sweep.data.jsonl import Fields, read_jsonl, require_file
from sweep.data.model import Document, EvalSet, Evidence, Question
from sweep.data.validate import RawQuestion, Where, assemble
from sweep.errors import Problem
from sweep.textfile import numbered_lines


def load_beir(folder: str | Path, split: str = "test", *, lenient: bool = False) -> EvalSet:
    folder = Path(folder)
    problems: list[Problem] = []
    documents = []
    for n, obj in read_jsonl(folder / "corpus.jsonl", problems):
        where = Where(str(folder / "corpus.jsonl"), n)
        f = Fields(obj, where, problems)
        doc_id, text = f.get("_id", str), f.get("text", str)
        title = f.get("title", str, required=False)
        if f.ok:
            documents.append((Document(doc_id, text, title or None, obj.get("metadata") or {}), where))

    queries: dict[str, tuple[str, Where]] = {}
    for n, obj in read_jsonl(folder / "queries.jsonl", problems):
        where = Where(str(folder / "queries.jsonl"), n)
        f = Fields(obj, where, problems)
        qid, text = f.get("_id", str), f.get("text", str)
        if f.ok:
            if qid in queries:
                f.fail("_id", f"duplicate query id {qid!r}")
            queries[qid] = (text, where)

    qrels_path = folder / "qrels" / f"{split}.tsv"
    evidence = _read_qrels(qrels_path, problems)
    questions = []
    for qid, items in evidence.items():
        if qid not in queries:
            problems.append(
                Problem(
                    str(qrels_path),
                    f"qrels name query {qid!r}, which queries.jsonl does not have",
                    items[0][1].line,
                )
            )
            continue
        text, where = queries[qid]
        question = Question(qid, text, tuple(e for e, _ in items), split=split)
        questions.append(
            RawQuestion(question, where, evidence_where={i: w for i, (_, w) in enumerate(items)})
        )
    return assemble(f"{folder.name}/{split}", documents, questions, problems, lenient=lenient)


def _read_qrels(path: Path, problems: list[Problem]) -> dict[str, list[tuple[Evidence, Where]]]:
    """Judgments by query, each with the qrels line it came from (errors about it point there)."""
    require_file(path)
    out: dict[str, list[tuple[Evidence, Where]]] = {}
    for n, line in numbered_lines(path):
        parts = line.split("\t")
        if n == 1 and parts[:2] == ["query-id", "corpus-id"]:
            continue
        if len(parts) != 3:
            problems.append(Problem(str(path), f"expected 3 tab-separated columns, got {len(parts)}", n))
            continue
        qid, doc_id, grade_text = parts
        try:
            grade = int(grade_text)
        except ValueError:
            problems.append(Problem(str(path), f"grade {grade_text!r} is not an integer", n, "score"))
            continue
        if grade < 0:
            problems.append(Problem(str(path), f"grade must be >= 0, got {grade}", n, "score"))
            continue
        items = out.setdefault(qid, [])
        if any(e.doc_id == doc_id for e, _ in items):
            problems.append(Problem(str(path), f"duplicate qrel for query {qid!r}, document {doc_id!r}", n))
            continue
        items.append((Evidence(doc_id, grade), Where(str(path), n)))
    if not out and not problems:
        problems.append(
            Problem(
                str(path),
                "no judgments: the qrels file is empty (one 'query-id<TAB>corpus-id<TAB>score' a line)",
            )
        )
    return out
