"""Dense encoding: sentence-transformers models and the embedding cache (searching them: ``faiss_index``).

Embeddings are cached per (model identity, settings, text hash) in a
:class:`RowStore`, so a text encoded once with a model is never encoded
again in any run or process; only the missing texts go to the model.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from sweep.cache import RowStore, content_key, text_key
from sweep.config.schema import DenseConfig, EncodeConfig
from sweep.logs import progress_bar
from sweep.models import model_identity, resolve_device
from sweep.retrieval.embedding import embed, load_sentence_transformer

log = logging.getLogger(__name__)


@dataclass
class EncodeStats:
    encoded: int = 0
    cached: int = 0
    seconds: float = 0.0


@dataclass
class Encoder:
    """Encodes texts through the cache; ``stats`` counts what really went to the model.

    Several processes encoding the same texts share the work shard by shard (:class:`RowStore`):
    each text goes to a model once, and a process whose shards another holds shows them landing.
    """

    config: DenseConfig
    cache_dir: str
    engine: EncodeConfig = field(default_factory=EncodeConfig)
    stats: EncodeStats = field(default_factory=EncodeStats)

    @cached_property
    def resolved(self) -> tuple[str, str]:
        """(device here, the vectors' float type); resolved on first use: a BM25-only run never imports torch.

        On Ray the float type is the workers' (``auto`` there means CUDA when they get GPUs), so that
        questions encoded here land in the same cache as the chunks encoded there.
        """
        c = self.config
        device, precision = resolve_device(c.device, c.precision, c.backend)
        return device, self.on_workers[1] if self.engine.engine == "ray" else precision

    @cached_property
    def on_workers(self) -> tuple[str, str]:
        """(device, precision) of the Ray actors."""
        device = self.config.device
        if device == "auto":
            device = "cuda" if self.engine.gpus_per_worker > 0 else "cpu"
        return resolve_device(device, self.config.precision, self.config.backend)

    @property
    def device(self) -> str:
        return self.resolved[0]

    @property
    def precision(self) -> str:
        return self.resolved[1]

    @cached_property
    def store(self) -> RowStore:
        c = self.config  # torch in float32 keeps the caches it made; any other backend or type has its own
        variant = () if c.backend == "torch" else (c.backend,)
        variant += () if self.precision == "float32" and not variant else (self.precision,)
        namespace = content_key(
            "embeddings",
            model_identity(self.config.model),
            self.config.normalize,
            self.config.max_seq_length,
            *variant,
        )
        return RowStore(self.cache_dir, namespace)

    def model(self):
        c = self.config
        return load_sentence_transformer(
            c.model, c.max_seq_length, self.device, self.precision, c.backend, self.cache_dir
        )

    def missing(self, texts: list[str], prefix: str = "") -> int:
        """How many distinct ``prefix + text`` have no cached vector yet: what encoding them all costs."""
        return self.store.missing({text_key(prefix + t) for t in texts})

    def encode(
        self,
        texts: list[str],
        prefix: str = "",
        progress: str | None = None,
        bulk: bool = False,
        keep: bool = True,
    ) -> np.ndarray:
        """Vectors of ``prefix + text`` in order; ``bulk`` (a whole chunk set) goes to Ray when that is the
        engine; ``keep=False`` (a served question): new vectors are not written to the cache."""
        full = [prefix + t for t in texts]
        keys = [text_key(t) for t in full]
        unique: dict[bytes, str] = dict(zip(keys, full))
        # a bar update every few batches; the model still sees whole batches
        step = self.config.batch_size * 8

        def bar(total: int):
            return progress_bar(
                total=total,
                desc=progress,
                unit="text",
                disable=progress is None or total <= step,
                leave=False,
                dynamic_ncols=True,
            )

        t, before = time.perf_counter(), self.stats.encoded
        if bulk and self.engine.engine == "ray":
            vectors, encoded = self._encode_on_ray(unique, bar)
        else:
            vectors, encoded = self.store.fetch_or_compute(
                list(unique), lambda ks, b: self._encode([unique[k] for k in ks], b, step), bar, keep=keep
            )
        self.stats.cached += len(unique) - encoded
        if progress is not None and encoded > step:
            seconds = time.perf_counter() - t
            log.info(
                "%s: %d texts in %.1fs (%.0f texts/s on %s)",
                progress,
                self.stats.encoded - before,
                seconds,
                (self.stats.encoded - before) / max(seconds, 1e-9),
                "Ray" if bulk and self.engine.engine == "ray" else self.device,
            )
        return np.stack([vectors[k] for k in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

    def _encode(self, texts: list[str], bar, step: int) -> np.ndarray:
        """The model's embeddings of ``texts``, ``step`` at a time onto ``bar``."""
        model = self.model()
        t = time.perf_counter()
        parts = []
        for start in range(0, len(texts), step):
            batch = texts[start : start + step]
            parts.append(embed(model, batch, self.config))
            bar.update(len(batch))
        new = np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
        self.stats.seconds += time.perf_counter() - t
        self.stats.encoded += len(texts)
        return new

    def _encode_on_ray(self, unique: dict[bytes, str], bar) -> tuple[dict[bytes, np.ndarray], int]:
        """The cached rows, and the missing ones embedded as one Ray job and written batch by batch.

        Every free shard is claimed for the one job (the cluster parallelises it): a second worker waits
        for those rows rather than sending the same texts to the cluster again."""
        from sweep.retrieval.ray_encode import encode_on_ray

        def compute(keys: list[bytes], b) -> None:
            def land(numbers: np.ndarray, vectors: np.ndarray) -> None:
                self.store.put_many([keys[i] for i in numbers], vectors)  # kept, should the job stop early
                b.update(len(numbers))

            t = time.perf_counter()
            encode_on_ray(
                [unique[k] for k in keys], self.config, *self.on_workers, self.engine, land, self.cache_dir
            )
            self.stats.seconds += time.perf_counter() - t
            self.stats.encoded += len(keys)

        return self.store.fetch_or_compute(list(unique), compute, bar, together=True)


def truncated_share(texts: list[str], config: DenseConfig) -> float:
    """The share of ``texts`` (with the document prefix) longer than the model's ``max_seq_length`` in tokens.

    The encoder silently cuts them: a chunk-size sweep with dense retrieval then compares chunks the
    model never read to the end.

    Args:
        texts: the indexed texts.
        config: the dense settings (model, prefix, max_seq_length).

    Returns:
        A share in [0, 1].

    Example:
        >>> truncated_share(["a short text"], DenseConfig(model="minilm-l6"))  # doctest: +SKIP
        0.0
    """
    if not texts:
        return 0.0
    model = load_sentence_transformer(
        config.model, config.max_seq_length, *resolve_device(config.device, config.precision)
    )
    limit = model.max_seq_length
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not limit or limit == float("inf"):  # inf: a static model, nothing is cut
        return 0.0
    lengths = [
        len(ids)
        for ids in tokenizer(
            [config.document_prefix + t for t in texts],
            add_special_tokens=True,
            truncation=False,
            verbose=False,
        )["input_ids"]
    ]
    return float(np.mean(np.asarray(lengths) > limit))
