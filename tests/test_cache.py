"""Cache entries carry shape, dtype and a checksum: damage is detected and recomputed."""

from __future__ import annotations

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
