"""TREC qrels and run files: ``qid iter docid grade`` and ``qid Q0 docid rank score tag``.

Reading fails loudly with the file and line of every problem: a well-formed file is parsed in C++
(Arrow's CSV reader, one space between tokens) and only a file with a problem is read line by line,
to name it.
Writing nudges tied scores apart so that trec_eval's tie rule keeps the ranking's own order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from sweep.errors import DataError, Problem
from sweep.textfile import numbered_lines


@dataclass
class TrecQrels:
    qid: list[str]
    docid: list[str]
    grade: np.ndarray


@dataclass
class TrecRun:
    qid: list[str]
    docid: list[str]
    score: np.ndarray


def read_qrels(path: str | Path) -> TrecQrels:
    qids, docids, grades, problems = [], [], [], []
    seen: set[tuple[str, str]] = set()
    for n, parts in _rows(path):
        if len(parts) != 4:
            problems.append(
                Problem(str(path), f"expected 4 columns 'qid iter docid grade', got {len(parts)}", n)
            )
            continue
        try:
            grades.append(int(parts[3]))
        except ValueError:
            problems.append(Problem(str(path), f"grade {parts[3]!r} is not an integer", n, "grade"))
            continue
        if (parts[0], parts[2]) in seen:
            problems.append(
                Problem(str(path), f"duplicate qrel for query {parts[0]!r}, document {parts[2]!r}", n)
            )
            grades.pop()
            continue
        seen.add((parts[0], parts[2]))
        qids.append(parts[0])
        docids.append(parts[2])
    if not qids and not problems:
        problems.append(
            Problem(str(path), "no judgments: the qrels file is empty (one 'qid iter docid grade' a line)")
        )
    if problems:
        raise DataError(problems)
    return TrecQrels(qids, docids, np.asarray(grades, dtype=np.int64))


def read_run(path: str | Path) -> TrecRun:
    qids, docids, scores, problems = [], [], [], []
    for n, parts in _rows(path):
        if len(parts) != 6:
            problems.append(
                Problem(str(path), f"expected 6 columns 'qid Q0 docid rank score tag', got {len(parts)}", n)
            )
            continue
        try:
            scores.append(float(parts[4]))
        except ValueError:
            problems.append(Problem(str(path), f"score {parts[4]!r} is not a number", n, "score"))
            continue
        if not math.isfinite(scores[-1]):
            scores.pop()  # NaN sorts anywhere: the ranking, and every measure, would be arbitrary
            problems.append(Problem(str(path), f"score {parts[4]!r} is not a finite number", n, "score"))
            continue
        qids.append(parts[0])
        docids.append(parts[2])
    if problems:
        raise DataError(problems)
    return TrecRun(qids, docids, np.asarray(scores, dtype=np.float64))


def _rows(path: str | Path):
    for n, line in numbered_lines(path):
        yield n, line.split()


Columns = tuple[pa.Array, pa.Array, np.ndarray]
_IRREGULAR = (b"\t", b"\r", b"\x0b", b"\x0c", b"  ", b"\n ", b" \n")  # anything but one space between tokens


def _table(path: str | Path, n_columns: int, types: dict[int, pa.DataType]) -> pa.Table | None:
    """The file's columns ``types`` (index -> type), parsed in C++; None when any line does not fit,
    so that the line-by-line reader names it."""
    try:
        data = Path(path).read_bytes().removeprefix(b"\xef\xbb\xbf")
    except OSError:
        return None
    if (
        any(x in data for x in _IRREGULAR) or data[:1] == b" " or data[-1:] == b" "
    ):  # tabs, runs of spaces, CRLF: one space between tokens, as split() sees it
        data = re.sub(rb"(?m)^ | $", b"", re.sub(rb"[ \t\r\x0b\x0c]+", b" ", data))
    names = [f"c{i}" for i in range(n_columns)]
    try:
        return pa_csv.read_csv(
            pa.py_buffer(data),
            read_options=pa_csv.ReadOptions(column_names=names),
            parse_options=pa_csv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False),
            convert_options=pa_csv.ConvertOptions(
                include_columns=[names[i] for i in types],
                column_types={names[i]: t for i, t in types.items()},
                null_values=[],
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        return None


def _array(table: pa.Table, i: int) -> pa.Array:
    return table.column(f"c{i}").combine_chunks()


def qrels_columns(path: str | Path) -> Columns:
    """A qrels file's (qids, docids, grades), with every check of :func:`read_qrels`.

    A well-formed file is parsed in one go (C++); one with a problem goes through :func:`read_qrels`,
    which names the line.

    Args:
        path: a TREC qrels file.

    Returns:
        Three parallel columns: the qids dictionary-encoded (Arrow's ``DictionaryArray``: the
        duplicate check computes it, and scoring numbers the questions by it), Arrow strings, int64
        grades.

    Raises:
        DataError: naming the file and line of each problem.

    Example:
        >>> qids, docids, grades = qrels_columns("qrels.txt")  # doctest: +SKIP
    """
    table = _table(path, 4, {0: pa.string(), 2: pa.string(), 3: pa.int64()})
    if table is not None and table.num_rows:
        qid, docid = pc.dictionary_encode(_array(table, 0)), _array(table, 2)
        pairs = qid.indices.to_numpy().astype(np.int64) * (len(docid) + 1)
        pairs += pc.dictionary_encode(docid).indices.to_numpy()
        if len(np.unique(pairs)) == len(pairs):  # a duplicate is an error, named by read_qrels
            return qid, docid, _array(table, 3).to_numpy()
    qrels = read_qrels(path)
    return (
        pc.dictionary_encode(pa.array(qrels.qid, pa.string())),
        pa.array(qrels.docid, pa.string()),
        qrels.grade,
    )


def run_columns(path: str | Path) -> Columns:
    """A run file's (qids, docids, scores), one entry a line, with every check of :func:`read_run`.

    A well-formed file is parsed in one go (C++); one with a problem goes through :func:`read_run`,
    which names the line.

    Args:
        path: a TREC run file.

    Returns:
        Three parallel columns: Arrow strings, Arrow strings, float64 scores.

    Raises:
        DataError: naming the file and line of each problem.

    Example:
        >>> qids, docids, scores = run_columns("run.trec")  # doctest: +SKIP
    """
    table = _table(path, 6, {0: pa.string(), 2: pa.string(), 4: pa.float64()})
    if table is not None and table.num_rows:
        score = _array(table, 4).to_numpy()
        if np.isfinite(score).all():
            return _array(table, 0), _array(table, 2), score
    run = read_run(path)  # something is wrong: read it line by line to say where
    return pa.array(run.qid, pa.string()), pa.array(run.docid, pa.string()), run.score


def strictly_decreasing(scores: np.ndarray) -> np.ndarray:
    """The scores of one ranking, tied ones nudged down by one step each, so that any tool's tie rule
    (trec_eval: docid descending) keeps the ranking's own order.

    The steps are float32 ones: trec_eval keeps scores in single precision, so two scores one float64
    step apart would tie there. Every float32 value is exact in float64, so the other tools agree.
    """
    out = np.asarray(scores, dtype=np.float32).copy()
    for i in range(1, len(out)):
        if out[i] >= out[i - 1]:
            out[i] = np.nextafter(out[i - 1], np.float32(-np.inf))
    return out.astype(np.float64)


def write_run(
    path: str | Path, rankings: Mapping[str, Sequence[tuple[str, float]]], tag: str = "rag-sweep"
) -> Path:
    """Write rankings as a TREC run file (``qid Q0 docid rank score tag``), exactly reproducible by trec_eval.

    Args:
        path: the file to write.
        rankings: ``{question: [(docid, score), ...]}`` best first.
        tag: the run's name (last column).

    Returns:
        The path written.

    Example:
        >>> write_run("run.trec", {"q1": [("d2", 0.9), ("d1", 0.9)]})  # d1's 0.9 is written a hair lower
    """
    Path(path).write_text(run_text(rankings, tag))
    return Path(path)


def run_text(rankings: Mapping[str, Sequence[tuple[str, float]]], tag: str = "rag-sweep") -> str:
    """What :func:`write_run` writes, as a string.

    Example:
        >>> run_text({"q1": [("d1", 0.5)]}, "x")
        'q1 Q0 d1 1 0.5 x\\n'
    """
    lines = []
    for qid, ranked in rankings.items():
        scores = strictly_decreasing(np.array([s for _, s in ranked], dtype=np.float64))
        lines += [
            f"{qid} Q0 {doc} {rank} {score!r} {tag}"
            for rank, ((doc, _), score) in enumerate(zip(ranked, scores.tolist()), 1)
        ]
    return "\n".join(lines) + ("\n" if lines else "")


__all__ = [
    "Columns",
    "TrecQrels",
    "TrecRun",
    "read_qrels",
    "read_run",
    "qrels_columns",
    "run_columns",
    "run_text",
    "strictly_decreasing",
    "write_run",
]
