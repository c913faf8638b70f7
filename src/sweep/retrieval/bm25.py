"""BM25 over chunks: rank-bm25 as the reference, a sparse-matrix backend as the default.

Both score with rank-bm25's ``BM25Okapi`` variant exactly: idf =
ln((N - n + 0.5) / (n + 0.5)), negative idf floored at ``epsilon`` × mean
idf, term weight idf × tf(k1 + 1) / (tf + k1(1 - b + b·dl/avgdl)), summed
over query tokens (repeats count). The sparse backend precomputes that
weight for every (chunk, term) once, so a query batch is one sparse product.
Chunks that share no term with the query are not returned.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from sweep.config.schema import BM25Config
from sweep.retrieval.results import StageResult, top_k

TOKEN = re.compile(r"\w+")
# Lucene's English stop words, which Anserini's BEIR baselines use
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)


class Analyzer:
    """Lowercase, word tokens, optional stop words and stemming (PyStemmer's Snowball)."""

    def __init__(self, config: BM25Config):
        self.lowercase = config.lowercase
        self.stopwords = ENGLISH_STOPWORDS if config.stopwords == "english" else frozenset()
        self._stem = None
        if config.stemming != "none":
            import Stemmer

            self._stem = lru_cache(maxsize=200_000)(Stemmer.Stemmer(config.stemming).stemWord)

    def __call__(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        words = [w for w in TOKEN.findall(text) if w not in self.stopwords]
        return [self._stem(w) for w in words] if self._stem else words


class SparseBM25:
    def __init__(self, corpus_tokens: list[list[str]], config: BM25Config):
        self.vocab: dict[str, int] = {}
        indptr, indices = [0], []
        for tokens in corpus_tokens:
            indices.extend(self.vocab.setdefault(t, len(self.vocab)) for t in tokens)
            indptr.append(len(indices))
        n_docs = len(corpus_tokens)
        tf = sp.csr_matrix(
            (
                np.ones(len(indices), dtype=np.float64),
                np.asarray(indices, dtype=np.int64),
                np.asarray(indptr),
            ),
            shape=(n_docs, len(self.vocab)),
        )
        tf.sum_duplicates()
        doc_len = np.diff(indptr).astype(np.float64)
        avgdl = doc_len.mean() if n_docs else 0.0
        df = np.bincount(tf.indices, minlength=len(self.vocab)).astype(np.float64)
        idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
        eps = config.epsilon * (idf.sum() / len(idf)) if len(idf) else 0.0
        idf[idf < 0] = eps
        rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
        denom = tf.data + config.k1 * (1 - config.b + config.b * doc_len[rows] / avgdl)
        weights = idf[tf.indices] * tf.data * (config.k1 + 1) / denom
        self.weights = sp.csr_matrix(
            (weights, tf.indices, tf.indptr), shape=tf.shape
        ).T.tocsr()  # terms x docs
        self.tf = tf  # docs x terms counts, for pseudo-relevance feedback
        self.terms = list(self.vocab)

    def weighted_scores(self, queries: list[dict[str, float]]) -> np.ndarray:
        """Scores of weighted queries: sum over terms of weight x the term's BM25 contribution."""
        rows, cols, vals = [], [], []
        for i, q in enumerate(queries):
            for t, w in q.items():
                if t in self.vocab:
                    rows.append(i), cols.append(self.vocab[t]), vals.append(w)
        q = sp.csr_matrix((vals, (rows, cols)), shape=(len(queries), len(self.vocab)))
        return np.asarray((q @ self.weights).todense())

    def scores(self, queries_tokens: list[list[str]]) -> np.ndarray:
        indptr, indices = [0], []
        for tokens in queries_tokens:
            indices.extend(self.vocab[t] for t in tokens if t in self.vocab)
            indptr.append(len(indices))
        q = sp.csr_matrix(
            (np.ones(len(indices)), np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
            shape=(len(queries_tokens), len(self.vocab)),
        )
        return np.asarray((q @ self.weights).todense())


class RankBM25:
    """The reference: rank-bm25's BM25Okapi, one query at a time."""

    def __init__(self, corpus_tokens: list[list[str]], config: BM25Config):
        from rank_bm25 import BM25Okapi

        self.model = BM25Okapi(corpus_tokens, k1=config.k1, b=config.b, epsilon=config.epsilon)

    def scores(self, queries_tokens: list[list[str]]) -> np.ndarray:
        return (
            np.stack([self.model.get_scores(q) for q in queries_tokens])
            if queries_tokens
            else np.zeros((0, 0))
        )


BACKENDS = {"sparse": SparseBM25, "rank_bm25": RankBM25}


class BM25Index:
    """Chunks analysed and indexed once; ``search`` any number of query batches against them.

    Args:
        chunk_texts: what is indexed, one text per chunk.
        config: tokenisation and BM25 parameters.
        rm3: an RM3Config when queries are expanded (it reads the term matrix, so the sparse backend).

    Example:
        >>> index = BM25Index(["a cat", "a dog"], BM25Config(stemming="none", stopwords="none"))
        >>> index.search(["dog"], depth=1).ids.tolist()
        [[1]]
    """

    def __init__(self, chunk_texts: list[str], config: BM25Config, rm3=None):
        self.config, self.rm3 = config, rm3
        self.analyze = Analyzer(config)
        backend = SparseBM25 if rm3 is not None else BACKENDS[config.backend]
        self.index = backend([self.analyze(t) for t in chunk_texts], config)

    def search(self, queries: list[str], depth: int, allowed: np.ndarray | None = None) -> StageResult:
        """Top ``depth`` chunks per query (``allowed``: a (queries, chunks) mask); RM3 adds a second pass."""
        from sweep.retrieval.query import rm3_query_weights

        query_tokens = [self.analyze(q) for q in queries]
        results = []
        for start in range(0, len(queries), 1024):  # bounded memory: 1024 x chunks scores at a time
            batch = query_tokens[start : start + 1024]
            scores = self.index.scores(batch)
            keep = scores > 0
            if allowed is not None:
                keep &= allowed[start : start + 1024]
            if self.rm3 is not None:
                fb = top_k(scores, self.rm3.fb_docs, keep)
                expanded = [
                    rm3_query_weights(self.index, toks, ids, s, self.rm3)
                    for toks, ids, s in zip(batch, fb.ids, fb.scores)
                ]
                scores = self.index.weighted_scores(expanded)
                keep = scores > 0 if allowed is None else (scores > 0) & allowed[start : start + 1024]
            results.append(top_k(scores, depth, keep))
        return StageResult(np.vstack([r.ids for r in results]), np.vstack([r.scores for r in results]))


def bm25_search(
    chunk_texts: list[str],
    queries: list[str],
    config: BM25Config,
    depth: int,
    allowed: np.ndarray | None = None,
    rm3=None,
) -> StageResult:
    """Top ``depth`` chunks per query; with ``rm3`` (an RM3Config) a second, expanded pass."""
    return BM25Index(chunk_texts, config, rm3).search(queries, depth, allowed)
