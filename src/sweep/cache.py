"""Content-addressed on-disk caches, safe for concurrent processes.

Two shapes, one file format:

* :class:`StageCache`: whole results keyed by a hash of everything they
  depend on (a BM25 top-N for these chunks, these queries, these settings).
* :class:`RowStore`: one row per content key (an embedding per chunk text and
  model, a reranker score per query/text pair), appended as shard files so
  that a text encoded once is never encoded again, by any run or worker.

Every file is written to a temporary name and renamed into place (atomic on
POSIX), and carries a header with each array's shape, dtype and a SHA-256 of
the payload: a truncated or corrupt entry is reported, removed and
recomputed, never used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
import uuid
from pathlib import Path

import numpy as np

from sweep.errors import SweepError
from sweep.locks import try_lock
from sweep.logs import progress_bar

log = logging.getLogger(__name__)
MAGIC = b"RAGSWEEP1\n"
SHARD_ROWS = 256  # rows a process claims at a time: small enough to share, big enough for whole batches
WAIT_POLL_S = 0.2


def content_key(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(
            repr(p).encode() if not isinstance(p, (bytes, str)) else (p.encode() if isinstance(p, str) else p)
        )
        h.update(b"\0")
    return h.hexdigest()[:32]


def text_key(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8")).digest()


def array_bytes(value) -> int:
    """What a cached value's arrays occupy: a dict of arrays, or anything with ``arrays()`` (a StageResult).

    Args:
        value: the value.

    Returns:
        Its arrays' bytes (at least 1, as ``cachetools`` sizes must be positive).

    Example:
        >>> array_bytes({"ids": np.zeros(4, np.int64)})
        32
    """
    arrays = value if isinstance(value, dict) else value.arrays()
    return max(1, sum(a.nbytes for a in arrays.values()))


def keep_in_memory(cache, key, value) -> None:
    """``cache[key] = value`` unless the value alone outgrows the bounded ``cache`` (it is on disk anyway).

    Args:
        cache: a ``cachetools`` cache with ``maxsize`` and ``getsizeof``.
        key: the key.
        value: the value.

    Example:
        >>> from cachetools import LRUCache
        >>> c = LRUCache(16, getsizeof=array_bytes); keep_in_memory(c, "big", {"a": np.zeros(4)}); len(c)
        0
    """
    if cache.getsizeof(value) <= cache.maxsize:
        cache[key] = value


class CorruptEntry(Exception):
    pass


class CacheWriteError(SweepError):
    """The cache folder cannot take a write (full disk, read-only, no permission): no trial can succeed."""


def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    try:
        _write_arrays(path, arrays)
    except OSError as e:
        raise CacheWriteError(
            f"cache_dir: cannot write {path} ({e.strerror or e}); free some space or point "
            "cache_dir at a writable folder"
        ) from None


def _write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = [np.ascontiguousarray(a) for a in arrays.values()]
    digest = hashlib.sha256()
    for a in payload:
        digest.update(a.tobytes())
    header = {
        "arrays": [
            {"name": n, "shape": list(a.shape), "dtype": a.dtype.str} for n, a in zip(arrays, payload)
        ],
        "sha256": digest.hexdigest(),
    }
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(MAGIC + json.dumps(header).encode() + b"\n")
            for a in payload:
                fh.write(a.tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written file behind


def read_arrays(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise CorruptEntry(f"{path}: not a rag-sweep cache file")
    end = data.find(b"\n", len(MAGIC))
    try:
        header = json.loads(data[len(MAGIC) : end])
    except (json.JSONDecodeError, ValueError) as e:
        raise CorruptEntry(f"{path}: unreadable header") from e
    out, offset, digest = {}, end + 1, hashlib.sha256()
    for spec in header["arrays"]:
        dtype = np.dtype(spec["dtype"])
        size = int(np.prod(spec["shape"])) * dtype.itemsize
        chunk = data[offset : offset + size]
        if len(chunk) != size:
            raise CorruptEntry(f"{path}: truncated ({len(data)} bytes)")
        digest.update(chunk)
        out[spec["name"]] = np.frombuffer(chunk, dtype=dtype).reshape(spec["shape"])
        offset += size
    if digest.hexdigest() != header["sha256"] or offset != len(data):
        raise CorruptEntry(f"{path}: checksum mismatch")
    return out


def _read_or_discard(path: Path) -> dict[str, np.ndarray] | None:
    try:
        return read_arrays(path)
    except FileNotFoundError:
        return None
    except (CorruptEntry, OSError, KeyError, ValueError) as e:
        log.warning("cache entry %s is corrupt (%s); removing it, it will be recomputed", path, e)
        path.unlink(missing_ok=True)
        return None


class StageCache:
    def __init__(self, root: str | Path):
        self.root = Path(root) / "stages"

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.arr"

    def get(self, key: str) -> dict[str, np.ndarray] | None:
        return _read_or_discard(self.path(key))

    def put(self, key: str, arrays: dict[str, np.ndarray]) -> None:
        write_arrays(self.path(key), arrays)


class RowStore:
    """``key (20 bytes) -> float32 row`` in append-only shards under one namespace."""

    def __init__(self, root: str | Path, namespace: str):
        self.dir = Path(root) / "rows" / namespace
        self._index: dict[bytes, tuple[Path, int]] = {}
        self._shards: dict[Path, np.ndarray] = {}

    def _refresh(self) -> None:
        if not self.dir.is_dir():
            return
        for path in self.dir.glob("*.arr"):
            if path in self._shards:
                continue
            arrays = _read_or_discard(path)
            if arrays is None:
                continue
            self._shards[path] = arrays["rows"]
            for i, k in enumerate(arrays["keys"]):
                self._index.setdefault(k.tobytes(), (path, i))

    def missing(self, keys: set[bytes]) -> int:
        """How many of ``keys`` no shard on disk holds yet."""
        if any(k not in self._index for k in keys):
            self._refresh()
        return sum(k not in self._index for k in keys)

    def get_many(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray | None]:
        """(found mask, rows for the found keys in order) after looking at shards on disk."""
        if any(k not in self._index for k in keys):
            self._refresh()
        found = np.array([k in self._index for k in keys], dtype=bool)
        if not found.any():
            return found, None
        rows = [self._row(k) for k, f in zip(keys, found) if f]
        return found, np.stack(rows)

    def fetch_or_compute(
        self, keys: list[bytes], compute, progress=None, together: bool = False, keep: bool = True
    ) -> tuple[dict[bytes, np.ndarray], int]:
        """Rows for distinct ``keys``: those on disk are read, the rest computed in shards that processes share.

        The missing keys fall into shards by their hash, so every process asking for the same keys
        sees the same shards. A process claims a free shard with a non-blocking file lock, looks
        again, computes what is still missing and writes it; a shard another process holds is
        skipped, then waited for once the free ones are done. A waiting process sees those shards
        land on its progress bar, and takes over a shard whose holder died (the kernel drops its lock).

        Args:
            keys: distinct row keys.
            compute: ``compute(keys, bar)`` returns their rows in order, or None when it has put them
                itself as they came (:meth:`put_many`); it may ``bar.update(n)``.
            progress: ``progress(total)`` returns the bar (a tqdm context) for the missing rows.
            together: claim every free shard at once and compute them in one call: for a cluster job,
                which parallelises by itself, so another process waits instead of sending the same rows.
            keep: write the computed rows; False (serving new questions): computed, returned, not kept,
                so the cache does not grow with use.

        Returns:
            (rows by key, how many rows this process computed).

        Example:
            >>> store = RowStore("/tmp/rag-sweep-doc", "ones")
            >>> rows, _ = store.fetch_or_compute([b"k" * 20], lambda ks, bar: np.ones((len(ks), 1)))
            >>> rows[b"k" * 20].tolist()
            [1.0]
        """
        found, rows = self.get_many(keys)
        out = dict(zip([k for k, f in zip(keys, found) if f], rows if rows is not None else []))
        missing = [k for k, f in zip(keys, found) if not f]
        if not missing:
            return out, 0
        if not keep:
            with progress(len(missing)) if progress else progress_bar(disable=True) as bar:
                new = np.asarray(compute(missing, bar), dtype=np.float32)
            return out | dict(zip(missing, new)), len(missing)
        n_shards = -(-len(keys) // SHARD_ROWS)
        shards: dict[int, list[bytes]] = {}
        for k in missing:
            shards.setdefault(int.from_bytes(k[:4], "little") % n_shards, []).append(k)
        computed, waited = 0, False

        def take(done: list[bytes]) -> None:
            out.update((k, self._row(k)) for k in done)
            bar.update(len(done))
            bar.refresh()  # shown as it lands, however soon after the last update

        with progress(len(missing)) if progress else progress_bar(disable=True) as bar:
            while shards:
                self._refresh()
                for shard in [s for s, todo in shards.items() if all(k in self._index for k in todo)]:
                    take(shards.pop(shard))  # another process computed it
                with contextlib.ExitStack() as held:
                    claimed = []
                    for shard in list(shards):
                        if held.enter_context(try_lock(self.dir / ".claims" / f"{n_shards}-{shard}.lock")):
                            claimed.append(shards.pop(shard))
                            if not together:
                                break
                    if claimed:
                        self._refresh()  # rows may have landed since the look above
                        take([k for todo in claimed for k in todo if k in self._index])
                        todo = [k for part in claimed for k in part if k not in self._index]
                        if todo:
                            new = compute(todo, bar)
                            if new is not None:
                                self.put_many(todo, np.asarray(new, dtype=np.float32))
                            out.update((k, self._row(k)) for k in todo)
                            computed += len(todo)
                        continue
                if shards:
                    if not waited:
                        log.info(
                            "another process is computing %d of these rows; waiting for them",
                            sum(map(len, shards.values())),
                        )
                        bar.set_postfix_str("waiting for another worker's shards")
                        waited = True
                    time.sleep(WAIT_POLL_S)
        return out, computed

    def _row(self, key: bytes) -> np.ndarray:
        path, i = self._index[key]
        return self._shards[path][i]

    def put_many(self, keys: list[bytes], rows: np.ndarray) -> None:
        if not keys:
            return
        path = self.dir / f"{uuid.uuid4().hex}.arr"
        key_array = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 20)
        rows = np.asarray(rows, dtype=np.float32)
        write_arrays(path, {"keys": key_array, "rows": rows})
        self._shards[path] = rows
        for i, k in enumerate(keys):
            self._index.setdefault(k, (path, i))
