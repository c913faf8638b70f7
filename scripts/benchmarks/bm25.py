"""BM25's whole path against bm25s, from the same raw SciFact texts to the same top 100."""

from __future__ import annotations

import time

import numpy as np

from benchmarks.common import scifact_texts, timed, timed_pair


def bench_bm25() -> dict:
    """BM25's whole path on both sides from the same raw SciFact texts to the same output, the top 100
    (ids and scores) of 300 questions: tokenise and stem (the same regex, stop words and Snowball
    stemmer on both), index, query. bm25s's "robertson" scores are ours / (k1 + 1); checked equal."""
    import bm25s
    import Stemmer

    from sweep.config.schema import BM25Config
    from sweep.retrieval.bm25 import ENGLISH_STOPWORDS, Analyzer, BM25Index, RankBM25

    docs, queries = scifact_texts()
    config = BM25Config()
    stemmer = Stemmer.Stemmer(config.stemming)
    stemmer.maxCacheSize = 0  # as ours: both stem each distinct word once, PyStemmer's cache only costs
    tokenize = dict(token_pattern=r"(?u)\w+", stopwords=sorted(ENGLISH_STOPWORDS), show_progress=False)

    def ours():
        return BM25Index(docs, config).search(queries, 100)

    def theirs():
        index = bm25s.BM25(k1=config.k1, b=config.b, method="robertson")
        index.index(bm25s.tokenize(docs, stemmer=stemmer.stemWords, **tokenize), show_progress=False)
        return index.retrieve(
            bm25s.tokenize(queries, stemmer=stemmer.stemWords, **tokenize),
            k=100,
            show_progress=False,
            n_threads=1,
        )

    counts = Analyzer(config).counts(docs)
    (ours_wall, ours_cpu, mine), (theirs_wall, theirs_cpu, (ids, scores)) = timed_pair(ours, theirs, 9)
    warm_wall, warm_cpu, _ = timed(
        lambda: BM25Index(docs, config, counts=lambda t: counts).search(queries, 100)
    )
    answered = np.isfinite(mine.scores) & (mine.scores > 0)
    theirs_scaled = scores * (config.k1 + 1)
    equal = bool(
        np.allclose(np.where(answered, mine.scores, 0), np.where(answered, theirs_scaled, 0), rtol=1e-5)
    )
    t = time.perf_counter()
    analyze = Analyzer(config)
    RankBM25([analyze(d) for d in docs], config).scores([analyze(q) for q in queries])
    rank_bm25_s = time.perf_counter() - t
    print(
        f"bm25 whole path (tokenise, index, 300 SciFact questions, top 100), median of 9 alternated: ours "
        f"{ours_wall:.3f} s wall / {ours_cpu:.3f} s CPU, bm25s {theirs_wall:.3f} s / {theirs_cpu:.3f} s "
        f"-> {theirs_wall / ours_wall:.2f}x; with the token cache warm (a sweep's next k1, b) "
        f"{warm_wall:.3f} s -> {theirs_wall / warm_wall:.1f}x; top-100 scores equal: {equal}; "
        f"rank_bm25 (once) {rank_bm25_s:.1f} s"
    )
    return {
        "bm25_whole_vs_bm25s": theirs_wall / ours_wall,
        "bm25_whole_cpu_vs_bm25s": theirs_cpu / ours_cpu,
        "bm25_warm_tokens_vs_bm25s": theirs_wall / warm_wall,
        "bm25_scores_equal_bm25s": equal,
        "bm25_vs_rank_bm25": rank_bm25_s / ours_wall,
    }
