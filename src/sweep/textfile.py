"""Reading the user's text files: UTF-8, with or without a byte-order mark.

Every input file (configs, eval sets, qrels, runs, CSVs) is read through
:func:`read_text`, so a BOM written by a Windows editor never sticks to the
first id, and a file in another encoding is one error naming the file and
the line of the first bad byte, not a traceback or a silently skipped line.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from sweep.errors import DataError, Problem


def read_text(path: str | Path) -> str:
    """The file's text, decoded as UTF-8 with an optional byte-order mark.

    Args:
        path: the file to read.

    Returns:
        Its text, without the BOM.

    Raises:
        DataError: the file is missing or not UTF-8 (the message names the line).

    Example:
        >>> read_text("questions.jsonl").splitlines()[0]  # doctest: +SKIP
        '{"id": "q1", ...}'
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(Problem(str(path), "file not found")) from None
    except IsADirectoryError:
        raise DataError(Problem(str(path), "is a folder, expected a file")) from None
    except OSError as e:
        raise DataError(Problem(str(path), f"cannot be read ({e.strerror})")) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(
            Problem(str(path), f"not UTF-8 text (byte 0x{data[e.start]:02x}); save the file as UTF-8", line)
        ) from None


def numbered_lines(path: str | Path):
    """``(line number, line)`` for every non-blank line of a UTF-8 file."""
    for n, line in enumerate(read_text(path).split("\n"), start=1):  # not splitlines(): JSON may hold U+2028
        if line.strip():
            yield n, line.removesuffix("\r")


def write_whole(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) so that ``path`` holds the whole new text or the old one, never half:
    a uniquely named temporary file beside it, synced, then renamed over it.

    Args:
        path: the file to (re)write.
        text: its new content.

    Returns:
        The path.

    Example:
        >>> write_whole("labels/docs/pool.json", "{}")  # doctest: +SKIP
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a failed write leaves no stray file
    return path
