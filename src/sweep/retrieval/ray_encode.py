"""Encoding a big chunk set as a Ray Data job: the same model on a cluster's workers, rows into the same cache.

Ray is an optional extra (``pip install 'rag-sweep[ray]'``). With ``encode.engine: ray`` the texts
still missing from the embedding cache become a Ray dataset; model actors (each loading the
model once, through :func:`~sweep.retrieval.embedding.load_sentence_transformer`) embed its batches
on the cluster in ``encode.ray_address`` or ``RAY_ADDRESS``, or on a local Ray when neither is
set, and the driver writes each batch into the cache as it streams back, so an interrupted job
keeps what it finished. Every node needs rag-sweep and the model installed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from sweep.config.schema import DenseConfig, EncodeConfig
from sweep.errors import ConfigError
from sweep.retrieval.embedding import embed, load_sentence_transformer

log = logging.getLogger(__name__)


class EmbedBatches:
    """A Ray actor's work: load the model once, embed every batch it is handed (rows keep their numbers)."""

    def __init__(self, config_json: str, device: str, precision: str, cache_dir: str):
        c = self.config = DenseConfig.model_validate_json(config_json)
        self.model = load_sentence_transformer(
            c.model, c.max_seq_length, device, precision, c.backend, cache_dir
        )

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        return {"row": batch["row"], "vector": embed(self.model, texts, self.config)}


def connect(engine: EncodeConfig):
    """The ``ray`` module, initialised against the configured cluster (or a local Ray); once per process."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "",
            "encode.engine",
            "ray needs Ray",
            ["pip install 'rag-sweep[ray]'", "or set encode.engine: local"],
        ) from None
    if ray.is_initialized():
        return ray
    address = engine.ray_address or os.environ.get("RAY_ADDRESS") or None
    try:
        if address:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ConfigError(
            "",
            "encode.ray_address" if engine.ray_address else "encode.engine",
            f"cannot reach a Ray cluster at {address or 'a new local Ray'}: {str(e).splitlines()[0]}",
            [
                "start one (ray start --head) or unset RAY_ADDRESS for a local Ray",
                "a cluster with token auth needs RAY_AUTH_MODE=token here too",
            ],
        ) from None
    log.info("encoding on Ray (%s)", address or "a local Ray started for this run")
    return ray


def encode_on_ray(
    texts: list[str],
    config: DenseConfig,
    device: str,
    precision: str,
    engine: EncodeConfig,
    on_rows,
    cache_dir: str = ".cache/rag-sweep",
) -> None:
    """Embed ``texts`` as one Ray Data job, handing each finished batch to ``on_rows(rows, vectors)``.

    Args:
        texts: the texts to embed (prefixes applied).
        config: the dense settings (model, batch size, normalisation); the model name is made
            absolute when it is a local folder, so that workers find it.
        device: the resolved device every actor loads the model on.
        precision: the resolved float type.
        engine: the cluster address, actors, rows per batch and GPUs per actor.
        on_rows: called with ``(row numbers into texts, float32 vectors)`` as batches finish, in any order.
        cache_dir: where an exported backend's model file is made or found (on each worker's machine).

    Example:
        >>> encode_on_ray(["a"], DenseConfig(), "cpu", "float32", EncodeConfig(engine="ray"), print)  # doctest: +SKIP
    """
    if not texts:
        return
    ray = connect(engine)
    import pyarrow as pa

    folder = Path(config.model).expanduser()
    if folder.exists():
        config = config.model_copy(update={"model": str(folder.resolve())})
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the caller's bar shows the rows landing
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # and our log lines what runs where
    table = pa.table({"row": np.arange(len(texts)), "text": texts})
    step = engine.batch_rows
    blocks = [table.slice(start, step) for start in range(0, len(texts), step)]
    dataset = ray.data.from_arrow(blocks).map_batches(
        EmbedBatches,
        fn_constructor_args=(config.model_dump_json(), device, precision, cache_dir),
        batch_size=step,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=min(engine.workers, len(blocks))),
        num_cpus=engine.cpus_per_worker,
        num_gpus=engine.gpus_per_worker,
    )
    for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
        on_rows(batch["row"], np.asarray(batch["vector"], dtype=np.float32))
