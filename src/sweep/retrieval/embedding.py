"""A sentence-transformers model, loaded one way, and the one call that embeds texts with it.

The local encoder (:mod:`sweep.retrieval.dense`) and Ray's actors (:mod:`sweep.retrieval.ray_encode`)
both load and call the model here, so the two engines give the same vectors.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from sweep.config.schema import DenseConfig
from sweep.models import check_hub_model, describe_load_failure, model_identity, resolve_model
from sweep.retrieval.runtimes import use_backend


@lru_cache(maxsize=4)
def load_sentence_transformer(
    name: str,
    max_seq_length: int | None = None,
    device: str = "cpu",
    precision: str = "float32",
    backend: str = "torch",
    cache_dir: str = ".cache/rag-sweep",
):
    """One obvious way to load a model: folder, packaged alias, or hub name; on a resolved device, number
    type and backend (an exported backend's file is kept in ``cache_dir``, see :mod:`sweep.retrieval.runtimes`)."""
    import torch

    model = load_model("SentenceTransformer", name, device if backend == "torch" else "cpu")
    if backend != "torch":
        use_backend(model, model_identity(name), backend, precision, device, cache_dir)
    elif precision != "float32":
        model.to(getattr(torch, precision))
    if max_seq_length and math.isfinite(model.max_seq_length):  # a static model reads texts whole
        model.max_seq_length = max_seq_length
    return model


def load_model(kind: str, name: str, device: str):
    """A sentence-transformers ``SentenceTransformer`` or ``CrossEncoder`` by folder, alias or hub name.

    Args:
        kind: the class name.
        name: a local folder, a packaged alias or a hub name.
        device: where its torch weights go.

    Returns:
        The loaded model.

    Example:
        >>> load_model("CrossEncoder", "cross-encoder/ms-marco-MiniLM-L-6-v2", "cpu")  # doctest: +SKIP
    """
    import sentence_transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars say nothing a user needs
    resolved = resolve_model(name)
    if resolved == name and not Path(name).expanduser().exists():
        check_hub_model(name)  # seconds, not a minute and a half of download retries
    try:
        return getattr(sentence_transformers, kind)(resolved, device=device)
    except Exception as e:  # noqa: BLE001 - any loading failure becomes a config error naming the model
        raise describe_load_failure(name, e) from e


def embed(model, texts: list[str], config: DenseConfig) -> np.ndarray:
    """``model``'s float32 embeddings of ``texts`` in ``config``'s batches: the one call every engine makes.

    Args:
        model: a loaded sentence-transformers model.
        texts: the texts, prefixes applied.
        config: batch size and normalisation.

    Returns:
        ``(len(texts), dim)`` float32.

    Example:
        >>> embed(load_sentence_transformer("minilm-l6"), ["a"], DenseConfig()).shape  # doctest: +SKIP
        (1, 384)
    """
    vectors = model.encode(
        texts,
        batch_size=config.batch_size,
        convert_to_numpy=True,
        normalize_embeddings=config.normalize,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32)
