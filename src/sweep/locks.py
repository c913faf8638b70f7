"""File locks between processes on one machine: released by the kernel when their holder dies.

``flock`` rather than a lock file that exists: a SIGKILLed worker can leave no stale lock behind.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path):
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block.

    Args:
        path: the lock file; its folder is created.

    Example:
        >>> with file_lock(Path("/tmp/rag-sweep-doc.lock")):
        ...     pass
    """
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def try_lock(path: Path):
    """Take an exclusive lock on ``path`` if it is free; yields whether it was taken (held for the block).

    Args:
        path: the lock file; its folder is created.

    Example:
        >>> with try_lock(Path("/tmp/rag-sweep-doc.try.lock")) as mine:
        ...     mine
        True
    """
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def first_use_lock(url: str):
    """Serialise the first use of an SQLite store by processes started together on one machine.

    Optuna and MLflow both create (or migrate) their tables on first use, and two processes doing so
    at once collide (an alembic migration that "expected to match one row"). Other URLs: no lock.

    Args:
        url: an Optuna or MLflow store URL.

    Example:
        >>> with first_use_lock("sqlite:////tmp/rag-sweep-doc.db"):
        ...     pass
    """
    if not url.startswith("sqlite:///"):
        yield
        return
    with file_lock(Path(url.removeprefix("sqlite:///") + ".init.lock")):
        yield


def create_whole(url: str, create) -> None:
    """Create a new SQLite store whole, or not at all: built under a temporary name, then renamed.

    MLflow and Optuna create their tables one statement at a time; a process killed in between left
    a store that every later run refused ("table secrets already exists"). Other URLs, and stores
    that exist, are left to their library.

    Args:
        url: a store URL; only ``sqlite:///`` files are handled here.
        create: called with a ``sqlite:///`` URL of the temporary file; makes the tables there.

    Example:
        >>> create_whole("postgresql://db/test", print)  # not SQLite: nothing to do
    """
    if not url.startswith("sqlite:///"):
        return
    path = Path(url.removeprefix("sqlite:///"))
    if path.exists():
        return
    with first_use_lock(url):
        if path.exists():  # another process made it while we waited
            return
        tmp = path.with_name(f".{path.name}.{os.getpid()}.creating")
        tmp.unlink(missing_ok=True)
        try:
            create(f"sqlite:///{tmp}")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def write_ahead(target) -> None:
    """SQLite connections that ``target`` (an SQLAlchemy engine, or the Engine class: all of them) opens
    use a write-ahead log with ``synchronous=NORMAL``: a commit appends to the log without waiting
    for the disk (the log is synced at checkpoints) and readers never block the writer.

    A killed process loses nothing this way; a power cut may lose the last commits but never damages
    the file. For a study that costs a re-run of the trials lost, and MLflow is made to agree with
    the study (``tuning.reconcile``). Other databases are left as they are.

    Args:
        target: an ``sqlalchemy.engine.Engine`` or the class itself.

    Example:
        >>> import sqlalchemy
        >>> engine = sqlalchemy.create_engine("sqlite://")
        >>> write_ahead(engine)
    """
    import sqlite3

    import sqlalchemy

    def on_connect(connection, record) -> None:
        if not isinstance(connection, sqlite3.Connection):
            return
        cursor = connection.cursor()
        try:
            path = cursor.execute("PRAGMA database_list").fetchone()[2]
            if path.endswith(".creating"):  # create_whole renames it when done: no log may sit beside it
                return
            mode = cursor.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode == "wal":  # in a rollback journal, NORMAL is not safe against power cuts
                cursor.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.OperationalError:  # another process holds the file: this connection stays as it was
            pass
        finally:
            cursor.close()

    sqlalchemy.event.listen(target, "connect", on_connect)


__all__ = ["create_whole", "file_lock", "first_use_lock", "try_lock", "write_ahead"]
