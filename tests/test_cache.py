"""Cache entries carry shape, dtype and a checksum: damage is detected and recomputed."""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np

from sweep.cache import RowStore, StageCache, read_arrays, text_key, write_arrays


def test_round_trip_keeps_shape_and_dtype(tmp_path):
    arrays = {
        "ids": np.arange(12, dtype=np.int64).reshape(3, 4),
        "scores": np.linspace(0, 1, 6, dtype=np.float32),
    }
    write_arrays(tmp_path / "x.arr", arrays)
    back = read_arrays(tmp_path / "x.arr")
    assert back.keys() == arrays.keys()
    for k in arrays:
        assert back[k].dtype == arrays[k].dtype and (back[k] == arrays[k]).all()


def test_truncated_and_corrupted_entries_are_dropped(tmp_path, caplog):
    cache = StageCache(tmp_path)
    cache.put("k1", {"ids": np.arange(100)})
    cache.put("k2", {"ids": np.arange(100)})
    p1, p2 = cache.path("k1"), cache.path("k2")
    p1.write_bytes(p1.read_bytes()[:-40])  # truncated
    data = bytearray(p2.read_bytes())
    data[-5] ^= 0xFF  # one flipped byte
    p2.write_bytes(bytes(data))
    assert cache.get("k1") is None and cache.get("k2") is None
    assert not p1.exists() and not p2.exists()  # removed, so they are recomputed
    assert "truncated" in caplog.text and "checksum mismatch" in caplog.text


def test_row_store_recomputes_rows_of_a_corrupt_shard(tmp_path):
    store = RowStore(tmp_path, "emb")
    keys = [text_key(t) for t in ("a", "b")]
    store.put_many(keys, np.ones((2, 3), dtype=np.float32))
    shard = next(store.dir.glob("*.arr"))
    shard.write_bytes(shard.read_bytes()[:-1])
    found, _ = RowStore(tmp_path, "emb").get_many(keys)  # a new process reads from disk
    assert not found.any() and not shard.exists()


def test_corrupt_embedding_cache_is_recomputed_by_the_encoder(tmp_path):
    from sweep.config.schema import DenseConfig
    from sweep.retrieval import Encoder

    texts = ["alpha beta", "gamma delta"]
    first = Encoder(DenseConfig(), str(tmp_path)).encode(texts)
    for shard in (tmp_path / "rows").rglob("*.arr"):
        raw = bytearray(shard.read_bytes())
        raw[-3] ^= 0x55
        shard.write_bytes(bytes(raw))
    again = Encoder(DenseConfig(), str(tmp_path))
    second = again.encode(texts)
    assert again.stats.encoded == 2 and np.allclose(first, second, atol=1e-5)


def _shared_store_case(tmp_path, holder_writes: bool):
    """A row store asked for 600 rows while "another process" holds one shard's claim (a lock on its own
    file descriptor, which flock treats like another process); returns what was computed and shown."""
    import threading
    import time

    from sweep.cache import SHARD_ROWS
    from sweep.locks import try_lock

    keys = [text_key(f"text {i}") for i in range(600)]
    n_shards = -(-len(keys) // SHARD_ROWS)
    held = [k for k in keys if int.from_bytes(k[:4], "little") % n_shards == 0]
    computed: list[bytes] = []

    class Bar:
        shown = 0
        postfix = ""

        def __init__(self, total):
            assert total == len(keys)  # nothing on disk yet: all 600 are missing

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n):
            Bar.shown += n

        def refresh(self):
            pass

        def set_postfix_str(self, text):
            Bar.postfix = text

    def compute(ks, bar):
        computed.extend(ks)
        bar.update(len(ks))
        return np.array([[k[0]] for k in ks], dtype=np.float32)

    out: dict = {}
    claim = tmp_path / "rows" / "emb" / ".claims" / f"{n_shards}-0.lock"
    with try_lock(claim) as mine:
        assert mine
        worker = threading.Thread(
            target=lambda: out.update(RowStore(tmp_path, "emb").fetch_or_compute(keys, compute, Bar)[0])
        )
        worker.start()
        time.sleep(1.0)  # the worker has done the free shards and waits on the held one
        assert worker.is_alive() and len(computed) == len(keys) - len(held)
        if holder_writes:
            RowStore(tmp_path, "emb").put_many(held, np.full((len(held), 1), -1.0, dtype=np.float32))
    worker.join(timeout=10)
    return keys, held, computed, out, Bar


def test_rows_another_process_computes_are_waited_for_shown_and_not_computed_again(tmp_path, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="sweep"):
        keys, held, computed, out, bar = _shared_store_case(tmp_path, holder_writes=True)
    assert not set(held) & set(computed) and len(computed) == len(keys) - len(held)
    assert [out[k][0] for k in held] == [-1.0] * len(held)  # the other process's rows, as it wrote them
    assert bar.shown == len(keys)  # its own rows and the landed ones, on one bar
    assert "waiting" in bar.postfix and f"computing {len(held)} of these rows" in caplog.text


def test_a_shard_whose_holder_died_is_computed_by_the_waiting_process(tmp_path):
    keys, held, computed, out, bar = _shared_store_case(tmp_path, holder_writes=False)
    assert sorted(computed) == sorted(keys)  # nothing landed: it took the shard over once the lock fell
    assert [out[k][0] for k in keys] == [float(k[0]) for k in keys] and bar.shown == len(keys)


def test_together_claims_every_free_shard_for_one_call_and_another_process_only_waits(tmp_path):
    """A cluster job (encode.engine: ray) takes all free shards at once: a second process asking for the
    same rows meanwhile computes none of them, and each row is computed once."""
    keys = [hashlib.sha1(str(i).encode()).digest() for i in range(900)]  # 4 shards of 256
    calls: dict[str, list[int]] = {"first": [], "second": []}
    started, release = threading.Event(), threading.Event()

    def compute_as(name):
        def compute(ks, bar):
            calls[name].append(len(ks))
            started.set()
            release.wait(10)  # a long job: the other process arrives while it runs
            return np.array([[k[0]] for k in ks], dtype=np.float32)

        return compute

    results = {}

    def run(name):
        results[name] = RowStore(tmp_path, "emb").fetch_or_compute(keys, compute_as(name), together=True)

    first = threading.Thread(target=run, args=("first",))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=run, args=("second",))
    second.start()
    time.sleep(1.0)  # the second has looked, found every shard held, and waits
    release.set()
    first.join(10)
    second.join(10)
    assert calls == {"first": [900], "second": []}  # one call for every row; none twice
    assert results["first"][1] == 900 and results["second"][1] == 0
    assert all(results["second"][0][k][0] == k[0] for k in keys)
