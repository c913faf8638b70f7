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
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, count

import numpy as np
import scipy.sparse as sp

from sweep.config.schema import BM25Config
from sweep.retrieval.filters import Filters
from sweep.retrieval.results import SCORE_CELLS, StageResult, top_k

TOKEN = re.compile(r"\w+")
# bytes.translate tables: ASCII word characters (what \w matches below 128) kept, or lowercased; the rest blank
_WORD = {c for c in range(128) if chr(c).isalnum() or chr(c) == "_"}
ASCII_WORDS = bytes(c if c in _WORD else 32 for c in range(256))
ASCII_WORDS_LOWERED = bytes(ord(chr(c).lower()) if c in _WORD else 32 for c in range(256))
# the same, keeping UTF-8's high bytes: a non-ASCII text splits at its ASCII non-word characters
MIXED_WORDS = bytes(c if c in _WORD or c >= 128 else 32 for c in range(256))
HIGH_BYTES = re.compile(rb"[\x80-\xff]+")  # where a UTF-8 text's non-ASCII characters are
MIXED_WORDS_LOWERED = bytes(ord(chr(c).lower()) if c in _WORD else c if c >= 128 else 32 for c in range(256))
# characters of text analysed at once when a chunk set's term counts are built (~60 MB of word objects)
BLOCK_CHARS = 4_000_000
# Lucene's English stop words, which Anserini's BEIR baselines use
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)


class Analyzer:
    """Lowercase, word tokens, optional stop words and stemming (PyStemmer's Snowball).

    ``analyzer(text)`` gives one text's tokens (queries); :meth:`counts` gives a whole chunk set's
    term counts at once, stemming each distinct word once: the same terms, a third of the time.
    """

    def __init__(self, config: BM25Config):
        self.lowercase = config.lowercase
        self.stopwords = ENGLISH_STOPWORDS if config.stopwords == "english" else frozenset()
        self._stemmer = None
        if config.stemming != "none":
            import Stemmer

            self._stemmer = Stemmer.Stemmer(config.stemming)
            self._stemmer.maxCacheSize = 0  # its own cache costs 3x the stemming of distinct words
            self._stem = lru_cache(maxsize=200_000)(self._stemmer.stemWord)

    def __call__(self, text: str) -> list[str]:
        if self.lowercase:
            text = text.lower()
        words = [w for w in TOKEN.findall(text) if w not in self.stopwords]
        return [self._stem(w) for w in words] if self._stemmer else words

    def counts(self, texts: list[str]) -> "TermCounts":
        """Every text's term counts, terms numbered in order of first occurrence (as token lists give them).

        Texts are read in blocks of about :data:`BLOCK_CHARS` characters, so the word objects of only one
        block are alive at a time (a whole 80,000-abstract corpus at once held 1.4 GB of them).

        Args:
            texts: the chunk texts.

        Returns:
            A :class:`TermCounts` equal to ``TermCounts.from_tokens([analyzer(t) for t in texts])``.

        Example:
            >>> Analyzer(BM25Config(stemming="none")).counts(["the cat", "cat cat"]).tf.toarray().tolist()
            [[1.0], [2.0]]
        """
        term_of: dict = {}  # word (bytes from the ASCII path, str otherwise) -> term id, -1 a stop word
        terms: dict[str, int] = {}  # stem -> term id, numbered in order of first occurrence
        blocks, start = [], 0
        while start < len(texts):
            end, size = start, 0
            while end < len(texts) and (end == start or size + len(texts[end]) <= BLOCK_CHARS):
                size, end = size + len(texts[end]), end + 1
            blocks.append(self._block_counts(texts[start:end], term_of, terms))
            start = end
        indptr = np.concatenate([[0], *(np.diff(b.indptr) for b in blocks)]).cumsum()
        return TermCounts(
            list(terms),
            sp.csr_matrix(
                (
                    np.concatenate([b.data for b in blocks] or [np.zeros(0)]),
                    np.concatenate([b.indices for b in blocks] or [np.zeros(0, np.int64)]),
                    indptr,
                ),
                shape=(len(texts), len(terms)),
            ),
        )

    def _mixed_words(self, text: str) -> list:
        """A non-ASCII text's words: split at ASCII non-word bytes in C, and only the pieces holding other
        characters through the regex (lowercased alone: no character's lowercase depends on its
        neighbours except a capital sigma's, so texts with one take the regex whole). The pieces are
        found from their high bytes, so a text costs a Python step per such piece, not per word."""
        if self.lowercase and "\u03a3" in text:
            return TOKEN.findall(text.lower())
        data = text.encode().translate(MIXED_WORDS_LOWERED if self.lowercase else MIXED_WORDS)
        words, done = [], 0
        for run in HIGH_BYTES.finditer(data):
            if run.start() < done:  # a second run of the piece just taken
                continue
            start, end = data.rfind(b" ", 0, run.start()) + 1, data.find(b" ", run.end())
            end = len(data) if end < 0 else end
            words += data[done:start].split()
            piece = data[start:end].decode()  # whole UTF-8 sequences: pieces end at ASCII bytes
            words += TOKEN.findall(piece.lower() if self.lowercase else piece)
            done = end
        return words + data[done:].split()

    def _block_counts(self, texts: list[str], term_of: dict, terms: dict[str, int]) -> sp.csr_matrix:
        """One block's (texts, terms) counts; words new to ``term_of`` are stemmed (each once) and numbered."""
        table = ASCII_WORDS_LOWERED if self.lowercase else ASCII_WORDS
        words_of = [  # an ASCII text's words as bytes: translate and split run in C, three times findall's speed
            t.encode().translate(table).split() if t.isascii() else self._mixed_words(t) for t in texts
        ]
        flat = list(chain.from_iterable(words_of))
        first: dict = {}  # word -> the position of its first occurrence in the block, filled in one C loop
        at = np.fromiter(map(first.setdefault, flat, count()), np.int64, len(flat))
        new = [w for w in first if w not in term_of]  # in order of first occurrence, as terms are numbered
        words = [w.decode() if isinstance(w, bytes) else w for w in new]  # b"cell" and "cell" meet below
        kept = [i for i, w in enumerate(words) if w not in self.stopwords]
        stems = [words[i] for i in kept]
        if self._stemmer is not None:
            stems = self._stemmer.stemWords(stems)
        term_of.update(zip(new, [-1] * len(new)))
        for i, stem in zip(kept, stems):
            term_of[new[i]] = terms.setdefault(stem, len(terms))
        term_at = np.full(len(flat), -1, dtype=np.int64)  # by first position: one gather maps every token
        term_at[np.fromiter(first.values(), np.int64, len(first))] = [term_of[w] for w in first]
        token_terms = term_at[at]
        keep = token_terms >= 0
        kept_before = np.concatenate([[0], np.cumsum(keep)])
        ends = np.cumsum(np.fromiter(map(len, words_of), np.int64, len(words_of)))
        return TermCounts.build(list(terms), token_terms[keep], kept_before[np.concatenate([[0], ends])]).tf


@dataclass
class TermCounts:
    """A chunk set as BM25 sees it: terms and a (chunks, terms) count matrix; cached per chunking and analyser.

    Args:
        terms: term id -> term.
        tf: ``(chunks, terms)`` float64 counts, CSR.

    Example:
        >>> TermCounts.from_tokens([["a", "b", "a"]]).tf.toarray().tolist()
        [[2.0, 1.0]]
    """

    terms: list[str]
    tf: sp.csr_matrix

    @classmethod
    def build(cls, terms: list[str], token_terms: np.ndarray, indptr: np.ndarray) -> "TermCounts":
        tf = sp.csr_matrix(
            (np.ones(len(token_terms)), np.asarray(token_terms, dtype=np.int64), np.asarray(indptr)),
            shape=(len(indptr) - 1, len(terms)),
        )
        tf.sum_duplicates()
        return cls(terms, tf)

    @classmethod
    def from_tokens(cls, corpus_tokens: list[list[str]]) -> "TermCounts":
        vocab: dict[str, int] = {}
        indptr, indices = [0], []
        for tokens in corpus_tokens:
            indices.extend(vocab.setdefault(t, len(vocab)) for t in tokens)
            indptr.append(len(indices))
        return cls.build(list(vocab), np.asarray(indices, dtype=np.int64), np.asarray(indptr))

    def arrays(self) -> dict[str, np.ndarray]:
        """For the stage cache: terms as one newline-joined byte string (a ``\\w+`` token has no newline)."""
        terms = np.frombuffer("\n".join(self.terms).encode(), dtype=np.uint8)
        return {"terms": terms, "data": self.tf.data, "indices": self.tf.indices, "indptr": self.tf.indptr}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> "TermCounts":
        terms = a["terms"].tobytes().decode().split("\n") if len(a["terms"]) else []
        shape = (len(a["indptr"]) - 1, len(terms))
        return cls(terms, sp.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=shape))


class SparseBM25:
    def __init__(self, corpus: "TermCounts | list[list[str]]", config: BM25Config):
        counts = corpus if isinstance(corpus, TermCounts) else TermCounts.from_tokens(corpus)
        tf, n_docs = counts.tf, counts.tf.shape[0]
        self.n_chunks = n_docs
        self.vocab = {t: i for i, t in enumerate(counts.terms)}
        doc_len = np.asarray(tf.sum(axis=1), dtype=np.float64).ravel()  # tokens per chunk (exact integers)
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
        self.terms = counts.terms

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
        self.n_chunks = len(corpus_tokens)

    def scores(self, queries_tokens: list[list[str]]) -> np.ndarray:
        return (
            np.stack([self.model.get_scores(q) for q in queries_tokens])
            if queries_tokens
            else np.zeros((0, 0))
        )


class BM25Index:
    """Chunks analysed and indexed once; ``search`` any number of query batches against them.

    Args:
        chunk_texts: what is indexed, one text per chunk.
        config: tokenisation and BM25 parameters.
        rm3: an RM3Config when queries are expanded (it reads the term matrix, so the sparse backend).
        counts: ``counts(chunk_texts)`` gives their :class:`TermCounts` (default
            :meth:`Analyzer.counts`); a sweep passes its cache of them per chunking and analyser,
            so a new k1 or b costs only the weights.

    Example:
        >>> index = BM25Index(["a cat", "a dog"], BM25Config(stemming="none", stopwords="none"))
        >>> index.search(["dog"], depth=1).ids.tolist()
        [[1]]
    """

    def __init__(self, chunk_texts: list[str], config: BM25Config, rm3=None, counts=None):
        self.config, self.rm3 = config, rm3
        self.analyze = Analyzer(config)
        if rm3 is None and config.backend == "rank_bm25":  # the reference reads token lists
            self.index = RankBM25([self.analyze(t) for t in chunk_texts], config)
        else:
            self.index = SparseBM25((counts or self.analyze.counts)(chunk_texts), config)

    def search(self, queries: list[str], depth: int, allowed: Filters | None = None) -> StageResult:
        """Top ``depth`` chunks per query (``allowed``: the chunks each may return); RM3 adds a second pass."""
        from sweep.retrieval.query import rm3_query_weights

        query_tokens = [self.analyze(q) for q in queries]
        step = max(1, min(1024, SCORE_CELLS // max(self.index.n_chunks, 1)))
        results = []
        for start in range(0, len(queries), step):
            batch = query_tokens[start : start + step]
            scores = self.index.scores(batch)
            keep = scores > 0
            if allowed is not None:
                keep &= allowed[start : start + step].dense()
            if self.rm3 is not None:
                fb = top_k(scores, self.rm3.fb_docs, keep)
                expanded = [
                    rm3_query_weights(self.index, toks, ids, s, self.rm3)
                    for toks, ids, s in zip(batch, fb.ids, fb.scores)
                ]
                scores = self.index.weighted_scores(expanded)
                keep = scores > 0 if allowed is None else (scores > 0) & allowed[start : start + step].dense()
            results.append(top_k(scores, depth, keep))
        return StageResult(np.vstack([r.ids for r in results]), np.vstack([r.scores for r in results]))
