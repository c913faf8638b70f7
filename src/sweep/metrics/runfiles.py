"""TREC qrels and run files: ``qid iter docid grade`` and ``qid Q0 docid rank score tag``.

Reading fails loudly with the file and line of every problem; a well-formed run file takes a fast
path (one split of the whole file) and only a file with a problem is read line by line, to name it.
Writing nudges tied scores apart so that trec_eval's tie rule keeps the ranking's own order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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


def read_run_columns(path: str | Path) -> tuple[list, list, np.ndarray]:
    """A run file's (qids, docids, scores), one entry a line, with the checks of :func:`read_run`.

    A well-formed file is split in one go and its ids come back as ``bytes`` (UTF-8, compared
    bytewise: trec_eval's strcmp order); any problem sends it through :func:`read_run`, which names
    the line (and returns ``str`` ids).

    Args:
        path: a TREC run file.

    Returns:
        Three parallel columns.

    Raises:
        DataError: naming the file and line of each problem.

    Example:
        >>> qids, docids, scores = read_run_columns("run.trec")  # doctest: +SKIP
    """
    try:
        data = Path(path).read_bytes().removeprefix(b"\xef\xbb\xbf")
        data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        data = None
    if data is not None:
        tokens = data.split()
        n = len(tokens) // 6
        lines = data.count(b"\n") + (not data.endswith(b"\n")) if data else 0
        # six tokens on every line: as many lines as sixes, and the rank column all integers (a line with
        # a column missing shifts a score or a docid there); anything else is read line by line below
        if len(tokens) % 6 == 0 and lines == n and all(map(bytes.isdigit, tokens[3::6])):
            try:
                scores = np.fromiter(map(float, tokens[4::6]), np.float64, n)
            except ValueError:
                scores = None
            if scores is not None and np.isfinite(scores).all():
                return tokens[0::6], tokens[2::6], scores
    run = read_run(path)  # something is wrong: read it line by line to say where
    return run.qid, run.docid, run.score


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
    lines = []
    for qid, ranked in rankings.items():
        scores = strictly_decreasing(np.array([s for _, s in ranked], dtype=np.float64))
        lines += [
            f"{qid} Q0 {doc} {rank} {score!r} {tag}"
            for rank, ((doc, _), score) in enumerate(zip(ranked, scores.tolist()), 1)
        ]
    Path(path).write_text("\n".join(lines) + ("\n" if lines else ""))
    return Path(path)


__all__ = [
    "TrecQrels",
    "TrecRun",
    "read_qrels",
    "read_run",
    "read_run_columns",
    "strictly_decreasing",
    "write_run",
]
