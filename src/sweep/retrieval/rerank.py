"""Second-stage reranking of the top ``depth`` candidates, with scores cached.

Kinds:

* ``cross_encoder``: a sentence-transformers ``CrossEncoder`` by hub name or
  folder (``cross-encoder/ms-marco-MiniLM-L-6-v2`` for users online).
* ``bi_encoder``: re-embed query and candidates with another (packaged)
  model and rank by cosine: works offline.
* ``maxsim``: ColBERT-style late interaction over the model's token vectors
  (sum over query tokens of the best cosine with any candidate token), no
  training; works offline.

Scores are cached per (kind, model, query text, chunk text), so toggling the
reranker or changing what comes before it only scores new pairs. Candidates
below ``depth`` keep their first-stage order after the reranked head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from sweep.cache import RowStore, content_key, text_key
from sweep.config.schema import DenseConfig, RerankConfig
from sweep.logs import progress_bar
from sweep.models import model_identity, resolve_device
from sweep.retrieval.dense import Encoder
from sweep.retrieval.embedding import load_model, load_sentence_transformer
from sweep.retrieval.results import StageResult
from sweep.retrieval.runtimes import use_backend


@lru_cache(maxsize=2)
def load_cross_encoder(name: str, backend: str = "torch", precision: str = "auto", cache_dir: str = ".cache"):
    """A cross-encoder by folder, packaged alias or hub name, on CUDA when present (float32 with torch: its
    scores rank); an exported backend swaps in its transformer core as for embedding models."""
    device, precision = resolve_device("auto", "float32" if backend == "torch" else precision, backend)
    model = load_model("CrossEncoder", name, device if backend == "torch" else "cpu")
    return use_backend(model, model_identity(name), backend, precision, device, cache_dir)


@dataclass
class Reranker:
    config: RerankConfig
    cache_dir: str
    scored: int = 0  # pairs that went to the model (cache misses)
    label: str = ""  # what its progress bars are for, e.g. "trial 7"
    keep: bool = True  # False when serving: new questions' pair scores are not written to the cache
    _store: RowStore = field(init=False)

    def __post_init__(self) -> None:
        self._store = RowStore(
            self.cache_dir,
            content_key("rerank", self.config.kind, model_identity(self.config.model), *self._variant()),
        )

    def _variant(self) -> tuple[str, ...]:
        """What the backend adds to the score cache's key: nothing for torch, so its caches stay valid."""
        c = self.config
        return () if c.backend == "torch" else (c.backend, resolve_device("cpu", c.precision, c.backend)[1])

    def rerank(self, queries: list[str], texts: list[str], first: StageResult) -> StageResult:
        depth = min(self.config.depth, first.ids.shape[1])
        head = first.ids[:, :depth]
        qi, rank = np.nonzero(head >= 0)
        chunk = head[qi, rank]
        keys = [text_key(queries[q] + "\0" + texts[c]) for q, c in zip(qi, chunk)]
        pairs = {
            k: (queries[q], texts[c]) for k, q, c in zip(keys, qi, chunk)
        }  # a pair repeated is scored once

        def score(missing: list[bytes], bar) -> np.ndarray:
            return self._score([pairs[k][0] for k in missing], [pairs[k][1] for k in missing], bar)[:, None]

        progress, step = self._progress(), self.config.batch_size * 8

        def bar(total: int):  # the bi-encoder's embeddings and maxsim's tokens have bars of their own
            hidden = total <= step or self.config.kind != "cross_encoder"
            return progress_bar(total=total, desc=progress, unit="pair", disable=hidden, leave=False)

        rows, computed = self._store.fetch_or_compute(list(pairs), score, bar, keep=self.keep)
        scores = np.array([rows[k][0] for k in keys], dtype=np.float32)
        self.scored += computed
        # reorder each row's head by the new scores (ties: first-stage order)
        head_scores = np.full(head.shape, -np.inf, dtype=np.float32)
        head_scores[qi, rank] = scores
        order = np.lexsort((np.broadcast_to(np.arange(depth), head.shape), -head_scores), axis=1)
        ids, out_scores = first.ids.copy(), first.scores.copy()
        ids[:, :depth] = np.take_along_axis(head, order, 1)
        out_scores[:, :depth] = np.take_along_axis(head_scores, order, 1)
        return StageResult(ids, out_scores)

    def _progress(self) -> str:
        what = f"reranking with {self.config.model}"
        return f"{self.label}: {what}" if self.label else what

    def _score(self, queries: list[str], texts: list[str], bar) -> np.ndarray:
        """Scores of the pairs, ``bar`` advanced per batch (per pair for the bi-encoder's texts)."""
        kind = self.config.kind
        if kind == "cross_encoder":
            model = load_cross_encoder(
                self.config.model, self.config.backend, self.config.precision, self.cache_dir
            )
            pairs = list(zip(queries, texts))
            step = self.config.batch_size * 8
            out = []
            for start in range(0, len(pairs), step):
                batch = pairs[start : start + step]
                out.append(
                    np.asarray(
                        model.predict(batch, batch_size=self.config.batch_size, show_progress_bar=False),
                        dtype=np.float32,
                    ).reshape(-1)
                )
                bar.update(len(batch))
            return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
        if kind == "bi_encoder":
            encoder = Encoder(
                DenseConfig(
                    model=self.config.model,
                    batch_size=self.config.batch_size,
                    max_seq_length=self.config.max_seq_length,
                    backend=self.config.backend,
                    precision=self.config.precision,
                ),
                self.cache_dir,
            )
            q = encoder.encode(queries, keep=self.keep)
            d = encoder.encode(texts, progress=self._progress())
            return (q * d).sum(axis=1).astype(np.float32)
        return self._maxsim(queries, texts)

    def _maxsim(self, queries: list[str], texts: list[str]) -> np.ndarray:
        c = self.config
        model = load_sentence_transformer(
            c.model, None, *resolve_device("auto", c.precision, c.backend), c.backend, self.cache_dir
        )

        def tokens(batch):  # noqa: E306
            out = model.encode(batch, output_value="token_embeddings", batch_size=self.config.batch_size)
            out = [t.float().cpu().numpy() for t in out]  # float32 on the host, whatever the device
            return [t / np.linalg.norm(t, axis=1, keepdims=True).clip(1e-9) for t in out]

        unique_q = list(dict.fromkeys(queries))
        q_tok = dict(zip(unique_q, tokens(unique_q)))
        scores = np.zeros(len(texts), dtype=np.float32)
        step = 256
        for start in progress_bar(
            range(0, len(texts), step), desc=self._progress(), disable=len(texts) <= step
        ):
            for j, d in enumerate(tokens(texts[start : start + step])):
                scores[start + j] = (q_tok[queries[start + j]] @ d.T).max(axis=1).sum()
        return scores
