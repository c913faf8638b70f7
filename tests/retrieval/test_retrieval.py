"""Retrieval stages: BM25 backends agree, fusion by hand, reranking plumbing, filters, views."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweep.config.schema import BM25Config, FusionConfig, RerankConfig
from sweep.pipeline.result import document_run
from sweep.retrieval import Reranker, StageResult, fuse, top_k
from sweep.retrieval.bm25 import Analyzer, BM25Index, RankBM25, SparseBM25, TermCounts
from sweep.retrieval.filters import Filters


def per_row(mask: np.ndarray) -> Filters:
    """A (questions, chunks) mask as filters, one per question."""
    return Filters.build(list(range(len(mask))), lambda i: mask[i])


def test_sparse_bm25_equals_rank_bm25_on_scifact(shared_data):
    from sweep.data import load_beir

    ds = load_beir(shared_data / "scifact", "test")
    config = BM25Config(k1=1.2, b=0.75)
    analyze = Analyzer(config)
    corpus = [analyze(f"{d.title} {d.text}") for d in ds.documents[:2000]]
    queries = [analyze(q.text) for q in ds.questions[:40]] + [["the", "the", "cell"], [], ["zzzunknown"]]
    ours = SparseBM25(corpus, config).scores(queries)
    reference = RankBM25(corpus, config).scores(queries)
    assert np.abs(ours - reference).max() < 1e-6


ANALYSERS = [
    BM25Config(),
    BM25Config(stopwords="none", stemming="none"),
    BM25Config(lowercase=False, stemming="english"),
]


@pytest.mark.parametrize("block_chars", [4_000_000, 7_000], ids=["one-block", "many-blocks"])
@pytest.mark.parametrize("config", ANALYSERS, ids=["porter", "plain", "cased"])
def test_whole_corpus_counts_equal_the_token_lists_on_scifact_and_chroma(
    shared_data, config, block_chars, monkeypatch
):
    """The fast path (ASCII texts through bytes.translate, each word stemmed once, a block of texts at a
    time) gives the same terms, numbered alike, and the same counts as analysing text by text, so every
    BM25 score is unchanged."""
    import sweep.retrieval.bm25 as bm25
    from sweep.data import load_beir

    monkeypatch.setattr(bm25, "BLOCK_CHARS", block_chars)

    scifact = [f"{d.title} {d.text}" for d in load_beir(shared_data / "scifact", "test").documents[:1500]]
    chroma = [p.read_text() for p in sorted((shared_data / "chroma-chunking").rglob("*.md"))][:3]
    texts = scifact + [t[i : i + 2000] for t in chroma for i in range(0, len(t), 2000)]
    assert any(not t.isascii() for t in texts) and any(t.isascii() for t in texts)
    analyze = Analyzer(config)
    fast, slow = analyze.counts(texts), TermCounts.from_tokens([analyze(t) for t in texts])
    assert fast.terms == slow.terms
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(fast.tf, name), getattr(slow.tf, name))
    cached = TermCounts.from_arrays(fast.arrays())  # what the stage cache gives back
    assert cached.terms == fast.terms and (cached.tf != fast.tf).nnz == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
        | st.text(alphabet="aAbBcC the_-19\n\t.\x0bé", max_size=40),  # mostly ASCII: the bytes path
        max_size=6,
    )
)
def test_whole_corpus_counts_equal_the_token_lists_on_any_text(texts):
    import sweep.retrieval.bm25 as bm25

    whole = bm25.BLOCK_CHARS
    try:
        for block_chars, config in [(whole, c) for c in ANALYSERS] + [(1, ANALYSERS[0]), (30, ANALYSERS[2])]:
            bm25.BLOCK_CHARS = block_chars  # 1: every text a block of its own
            analyze = Analyzer(config)
            fast, slow = analyze.counts(texts), TermCounts.from_tokens([analyze(t) for t in texts])
            assert (
                fast.terms == slow.terms and fast.tf.shape == slow.tf.shape and (fast.tf != slow.tf).nnz == 0
            )
    finally:
        bm25.BLOCK_CHARS = whole


TRICKY = [
    "ΟΔΟΣ.Α and ΟΔΟΣ. Α",  # final sigma: its lowercase depends on the letters beyond the full stop
    "ΑΣ'Β ΑΣ",
    "\u212a kelvin K",  # KELVIN SIGN lowercases to an ASCII k
    "İstanbul naïve–café x\u00a0y a\u0301b",  # dotted capital I, en dash, no-break space, combining accent
    "Ⅻ ½ ²³ 東京 tōkyō_x",
]


@pytest.mark.parametrize("config", ANALYSERS, ids=["porter", "plain", "cased"])
def test_non_ascii_texts_split_in_bytes_give_the_regex_words(config):
    analyze = Analyzer(config)
    fast, slow = analyze.counts(TRICKY), TermCounts.from_tokens([analyze(t) for t in TRICKY])
    assert fast.terms == slow.terms and (fast.tf != slow.tf).nnz == 0
    assert ("ς" in "".join(fast.terms)) == config.lowercase  # the final-sigma case was exercised


def test_bm25_idf_floor_and_repeated_query_terms_by_hand():
    # 3 docs; "a" is in all of them: idf = ln(0.5/3.5) < 0, floored at 0.25 * mean idf
    docs = [["a", "b"], ["a", "c"], ["a", "b", "c", "d"]]
    config = BM25Config(k1=1.5, b=0.75, stopwords="none", stemming="none")
    s = SparseBM25(docs, config)
    idf = {t: np.log(3 - n + 0.5) - np.log(n + 0.5) for t, n in {"a": 3, "b": 2, "c": 2, "d": 1}.items()}
    eps = 0.25 * np.mean(list(idf.values()))
    avgdl = 8 / 3

    def w(term, tf, dl):
        i = idf[term] if idf[term] >= 0 else eps
        return i * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * dl / avgdl))

    got = s.scores([["a", "a", "d"]])[0]
    assert got == pytest.approx([2 * w("a", 1, 2), 2 * w("a", 1, 2), 2 * w("a", 1, 4) + w("d", 1, 4)])


def test_bm25_search_returns_only_matching_chunks_and_respects_filters():
    texts = ["red apple", "green apple", "blue sky"]
    config = BM25Config(stemming="none")
    r = BM25Index(texts, config).search(["apple", "sky"], 3)
    assert r.ids.tolist() == [[0, 1, -1], [2, -1, -1]]
    allowed = np.array([[False, True, True], [True, True, True]])
    assert BM25Index(texts, config).search(["apple", "sky"], 3, per_row(allowed)).ids[0].tolist() == [
        1,
        -1,
        -1,
    ]


@pytest.mark.parametrize("rm3", [False, True], ids=["plain", "rm3"])
def test_bm25_query_batches_bounded_by_corpus_size_change_no_result(monkeypatch, rm3):
    """Queries are scored a few rows at a time on a big corpus (bounded memory); the rows are the same."""
    import sweep.retrieval.bm25 as bm25
    from sweep.config.schema import RM3Config

    texts = ["red apple pie", "green apple", "blue sky", "apple sky blue", "red red sky"]
    queries = ["apple", "sky", "red apple", "blue", "zzz", "pie sky"]
    allowed = np.ones((len(queries), len(texts)), bool)
    allowed[2, 0] = allowed[5, 3] = False
    allowed = per_row(allowed)
    config, expand = BM25Config(stemming="none"), RM3Config(fb_docs=2, fb_terms=3) if rm3 else None
    whole = BM25Index(texts, config, expand).search(queries, 4, allowed)
    for cells in (len(texts), 2 * len(texts) + 1):  # one query a batch; two, with a short last batch
        monkeypatch.setattr(bm25, "SCORE_CELLS", cells)
        batched = BM25Index(texts, config, expand).search(queries, 4, allowed)
        assert np.array_equal(batched.ids, whole.ids) and np.array_equal(batched.scores, whole.scores)
    assert whole.ids[2].tolist()[:1] != [0] and (whole.ids[0] >= 0).sum() == 3


def test_filters_store_one_mask_per_distinct_filter_and_slice_without_copying():
    masks = {"en": np.array([True, False, True]), "de": np.array([False, True, False])}
    f = Filters.build(["en", "de", "en", "en"], masks.__getitem__)
    assert f.masks.shape == (2, 3) and f.group.tolist() == [0, 1, 0, 0]
    assert f[1:3].dense().tolist() == [[False, True, False], [True, False, True]]
    assert f[np.array([3, 1])].masks is f.masks and f[np.array([3, 1])].group.tolist() == [0, 1]
    everything = Filters.build(["all", "en"], lambda k: np.ones(3, bool) if k == "all" else masks[k])
    assert everything.passes_all().tolist() == [True, False]
    assert f.key() == Filters.build(["en", "de", "en", "en"], masks.__getitem__).key() != f[1:].key()


def test_filtered_dense_questions_are_scored_exactly_in_bounded_batches(monkeypatch):
    import sweep.retrieval.faiss_index as faiss_index
    from sweep.config.schema import DenseConfig
    from sweep.retrieval.faiss_index import DenseIndex

    rng = np.random.default_rng(3)
    vectors, queries = rng.normal(size=(40, 8)).astype(np.float32), rng.normal(size=(7, 8)).astype(np.float32)
    mask = rng.random((7, 40)) < 0.5
    mask[2] = True  # unfiltered: answered by the FAISS index
    expected = top_k(queries @ vectors.T, 5, mask)  # brute force over the allowed chunks
    for cells in (faiss_index.SCORE_CELLS, 40, 81):  # all at once; one row a batch; two
        monkeypatch.setattr(faiss_index, "SCORE_CELLS", cells)
        got = DenseIndex(vectors, DenseConfig()).search(queries, 5, per_row(mask))
        assert np.array_equal(got.ids, expected.ids)
        assert np.allclose(got.scores, expected.scores, atol=1e-5)


def test_top_k_ties_keep_lower_index():
    r = top_k(np.array([[0.5, 0.9, 0.5, 0.9]]), 3)
    assert r.ids.tolist() == [[1, 3, 0]]


def result(ids, scores):
    return StageResult(np.array(ids, dtype=np.int64), np.array(scores, dtype=np.float32))


def test_linear_fusion_minmax_by_hand():
    lexical = result([[0, 1, 2]], [[10.0, 6.0, 2.0]])  # normalised 1, 0.5, 0
    dense = result([[2, 3, -1]], [[0.9, 0.5, -np.inf]])  # normalised 1, 0; chunk 0, 1 missing -> 0
    fused = fuse(lexical, dense, FusionConfig(method="linear", alpha=0.25), depth=4, n_chunks=4)
    # 0: .75*1 = .75; 1: .75*.5 = .375; 2: .75*0 + .25*1 = .25; 3: .25*0 = 0
    assert fused.ids.tolist() == [[0, 1, 2, 3]]
    assert fused.scores[0] == pytest.approx([0.75, 0.375, 0.25, 0.0])


def test_linear_fusion_extremes_are_the_pure_retrievers():
    lexical = result([[0, 1, 2]], [[3.0, 2.0, 1.0]])
    dense = result([[2, 1, 0]], [[0.9, 0.8, 0.1]])
    assert fuse(lexical, dense, FusionConfig(alpha=0.0), 3, 3).ids.tolist() == [[0, 1, 2]]
    assert fuse(lexical, dense, FusionConfig(alpha=1.0), 3, 3).ids.tolist() == [[2, 1, 0]]


def test_zscore_fusion_by_hand():
    lexical = result([[0, 1]], [[3.0, 1.0]])  # z: +1, -1
    dense = result([[1, 2]], [[0.8, 0.4]])  # z: +1, -1; chunk 0 missing -> floor -1
    fused = fuse(lexical, dense, FusionConfig(alpha=0.5, normalization="zscore"), 3, 3)
    # 0: .5*1 + .5*(-1) = 0; 1: .5*(-1) + .5*1 = 0; 2: .5*(-1) [lexical floor] + .5*(-1) = -1
    assert fused.ids.tolist() == [[0, 1, 2]]
    assert fused.scores[0] == pytest.approx([0.0, 0.0, -1.0])


def test_rrf_by_hand():
    lexical = result([[0, 1, 2]], [[3.0, 2.0, 1.0]])
    dense = result([[2, 0, -1]], [[0.9, 0.8, -np.inf]])
    fused = fuse(lexical, dense, FusionConfig(method="rrf", rrf_k=60), 3, 3)
    expected = {0: 1 / 61 + 1 / 62, 1: 1 / 62, 2: 1 / 63 + 1 / 61}
    assert fused.ids.tolist() == [[0, 2, 1]]
    assert fused.scores[0] == pytest.approx([expected[0], expected[2], expected[1]])


def test_dbsf_by_hand():
    """Qdrant's DBSF: each list to [0, 1] with mean ± 3 sample standard deviations as the ends."""
    lexical = result([[0, 1, 2]], [[3.0, 2.0, 1.0]])  # mean 2, sd 1: ends -1 and 5 -> 4/6, 3/6, 2/6
    dense = result([[1, 3, -1]], [[0.9, 0.5, -np.inf]])  # mean .7, sd sqrt(.08): ends .7 -/+ 3 sqrt(.08)
    fused = fuse(lexical, dense, FusionConfig(alpha=0.5, normalization="dbsf"), 4, 4)
    sd = np.sqrt(0.08)
    d = {1: (0.9 - 0.7 + 3 * sd) / (6 * sd), 3: (0.5 - 0.7 + 3 * sd) / (6 * sd)}  # 0.6179, 0.3821
    expected = {0: 0.5 * 4 / 6, 1: 0.5 * (3 / 6 + d[1]), 2: 0.5 * 2 / 6, 3: 0.5 * d[3]}  # missing: 0
    assert fused.ids.tolist() == [[1, 0, 3, 2]]
    assert fused.scores[0] == pytest.approx([expected[i] for i in (1, 0, 3, 2)], rel=1e-6)
    single = fuse(
        result([[0]], [[7.0]]), result([[1, 2]], [[1.0, 1.0]]), FusionConfig(normalization="dbsf"), 3, 3
    )
    assert single.scores[0] == pytest.approx([0.25, 0.25, 0.25])  # one result, or no spread: 0.5


def test_weighted_rrf_by_hand_and_equal_to_rrf_at_one_half():
    lexical = result([[0, 1, 2]], [[3.0, 2.0, 1.0]])
    dense = result([[2, 0, -1]], [[0.9, 0.8, -np.inf]])
    fused = fuse(lexical, dense, FusionConfig(method="weighted_rrf", alpha=0.8, rrf_k=60), 3, 3)
    expected = {0: 0.4 / 61 + 1.6 / 62, 1: 0.4 / 62, 2: 0.4 / 63 + 1.6 / 61}
    assert fused.ids.tolist() == [[2, 0, 1]]
    assert fused.scores[0] == pytest.approx([expected[2], expected[0], expected[1]])
    half = fuse(lexical, dense, FusionConfig(method="weighted_rrf", alpha=0.5), 3, 3)
    plain = fuse(lexical, dense, FusionConfig(method="rrf"), 3, 3)
    assert half.ids.tolist() == plain.ids.tolist() and half.scores.tolist() == plain.scores.tolist()


def test_document_view_ranks_a_document_at_its_best_chunk():
    run = np.array([[3, 0, 4, 1, -1], [2, 2, 5, -1, -1]])
    chunk_doc = np.array([0, 0, 1, 2, 2, 1])
    assert document_run(run, chunk_doc, 3).tolist() == [[2, 0, -1, -1, -1], [1, -1, -1, -1, -1]]


def test_cross_encoder_rerank_reorders_the_head_and_caches_scores(tiny_cross_encoder, tmp_path):
    from sentence_transformers import CrossEncoder

    queries = ["what is a cell", "stars in the sky"]
    texts = ["cells are units of life", "the sky at night", "stars burn hydrogen", "membranes wrap cells"]
    first = result([[0, 1, 2, 3], [1, 2, 0, 3]], [[4, 3, 2, 1], [4, 3, 2, 1]])
    config = RerankConfig(enabled=True, kind="cross_encoder", model=tiny_cross_encoder, depth=3)
    reranker = Reranker(config, str(tmp_path))
    out = reranker.rerank(queries, texts, first)
    reference = CrossEncoder(tiny_cross_encoder, device="cpu")
    for q in range(2):
        head = first.ids[q, :3]
        s = reference.predict([(queries[q], texts[c]) for c in head])
        expected = head[np.lexsort((np.arange(3), -s))]
        assert out.ids[q, :3].tolist() == expected.tolist()
        assert out.ids[q, 3] == first.ids[q, 3]  # below the depth: first-stage order kept
    assert reranker.scored == 6
    again = Reranker(config, str(tmp_path))  # a new process would see the same disk cache
    assert again.rerank(queries, texts, first).ids.tolist() == out.ids.tolist()
    assert again.scored == 0  # every pair answered from the cache


def test_missing_model_is_a_config_error():
    from sweep.errors import ConfigError
    from sweep.retrieval.rerank import load_cross_encoder

    with pytest.raises(ConfigError, match="cannot load model 'no-such-org/no-such-model'"):
        load_cross_encoder("no-such-org/no-such-model")


def test_maxsim_rerank_scores_by_hand(tmp_path):
    """ColBERT-style MaxSim: sum over query tokens of the best cosine with any text token."""
    from sweep.retrieval.embedding import load_sentence_transformer

    queries = ["immutable sequence"]
    texts = ["lists can change", "tuples are immutable sequences", "the sky is blue"]
    first = result([[0, 2, 1]], [[3, 2, 1]])
    reranker = Reranker(RerankConfig(enabled=True, kind="maxsim", model="minilm-l6", depth=3), str(tmp_path))
    out = reranker.rerank(queries, texts, first)
    model = load_sentence_transformer("minilm-l6")

    def unit(x):
        x = x.numpy()
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    q = unit(model.encode(queries, output_value="token_embeddings")[0])
    expected = [
        float((q @ unit(model.encode([t], output_value="token_embeddings")[0]).T).max(axis=1).sum())
        for t in texts
    ]
    assert out.ids[0].tolist() == list(np.argsort(-np.array(expected), kind="stable"))
    assert out.scores[0] == pytest.approx(sorted(expected, reverse=True), rel=1e-4)
    assert out.ids[0, 0] == 1  # the tuple sentence wins


@pytest.mark.parametrize("index", ["hnsw", "ivf"])
def test_approximate_indexes_find_the_exact_neighbours_on_easy_data(index):
    from sweep.config.schema import DenseConfig
    from sweep.retrieval.faiss_index import DenseIndex

    rng = np.random.default_rng(0)
    docs = rng.normal(size=(2000, 32)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries = docs[:50] + 0.01 * rng.normal(size=(50, 32)).astype(np.float32)
    exact = DenseIndex(docs, DenseConfig(index="flat")).search(queries, 5, None)
    approx = DenseIndex(docs, DenseConfig(index=index, ivf_lists=16, ivf_probe=8)).search(queries, 5, None)
    assert (exact.ids[:, 0] == np.arange(50)).all()
    assert (approx.ids[:, 0] == exact.ids[:, 0]).mean() >= 0.95


def test_hnsw_ef_search_trades_recall_as_faiss_does():
    """efSearch reaches FAISS, and more of it finds more of the exact top 10 on hard (random) queries."""
    from sweep.config.schema import DenseConfig
    from sweep.retrieval.faiss_index import DenseIndex, build_index

    rng = np.random.default_rng(1)
    docs = rng.normal(size=(5000, 32)).astype(np.float32)
    queries = rng.normal(size=(200, 32)).astype(np.float32)
    exact = DenseIndex(docs, DenseConfig(index="flat")).search(queries, 10)
    config = DenseConfig(index="hnsw", hnsw_m=8, hnsw_ef_construction=40)
    assert build_index(docs, config.model_copy(update={"hnsw_ef_search": 77})).hnsw.efSearch == 77
    overlap = {}
    for ef in (10, 40, 400):
        found = DenseIndex(docs, config.model_copy(update={"hnsw_ef_search": ef})).search(queries, 10)
        overlap[ef] = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found.ids, exact.ids)])
    assert overlap[10] < overlap[40] < overlap[400] and overlap[400] >= 0.99


def test_device_auto_is_the_cpu_in_float32_here_and_cuda_in_float16_where_present(monkeypatch):
    import torch

    from sweep.models import resolve_device

    assert resolve_device("auto", "auto") == ("cpu", "float32")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto", "auto") == ("cuda", "float16")
    assert resolve_device("auto", "bfloat16") == ("cuda", "bfloat16")
    assert resolve_device("cpu", "auto") == ("cpu", "float32")


def test_half_precision_embeddings_are_close_and_cached_apart(tmp_path):
    """bfloat16 (what a GPU user may pick) runs on the CPU too: vectors near float32's, in their own cache."""
    from sweep.config.schema import DenseConfig
    from sweep.retrieval import Encoder

    texts = ["lists grow as items are appended", "tuples are immutable records", "sets hold unique items"]
    full = Encoder(DenseConfig(device="cpu"), str(tmp_path))
    half = Encoder(DenseConfig(device="cpu", precision="bfloat16"), str(tmp_path))
    a, b = full.encode(texts), half.encode(texts)
    assert half.stats.encoded == 3 and half.store.dir != full.store.dir  # not read from float32's rows
    cosines = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosines.min() > 0.99 and not np.allclose(a, b, atol=1e-6)
    assert b.dtype == np.float32  # stored and searched as float32 whatever the model computed in
