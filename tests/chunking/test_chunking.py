"""Chunkers: exact offsets, coverage, configured overlap, no empty chunks (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweep.chunking import ChunkingConfig, chunk_text, get_tokenizer

PIECES = list("abcdefgh ĳé\n.?!,ü") + ["\n\n", "  ", "word", " the", "🙂"]
texts = st.lists(st.sampled_from(PIECES), max_size=150).map("".join)
sizes = st.integers(1, 40)


def covered(text: str, spans) -> np.ndarray:
    mask = np.zeros(len(text), dtype=bool)
    for s, e in spans:
        mask[s:e] = True
    return mask


def non_space(text: str) -> np.ndarray:
    return np.array([not c.isspace() for c in text], dtype=bool)


@settings(max_examples=150, deadline=None)
@given(text=texts, size=sizes, data=st.data())
def test_fixed_chars(text, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    spans = chunk_text(text, ChunkingConfig("fixed", size, overlap, "chars"))
    assert all(e > s and text[s:e].strip() for s, e in spans)
    assert all(e - s <= size for s, e in spans)
    # every non-whitespace character is in some chunk
    assert not (non_space(text) & ~covered(text, spans)).any()
    # before whitespace-only windows are dropped, windows step by size - overlap
    raw = chunk_text(
        text.replace(" ", "x").replace("\n", "x"), ChunkingConfig("fixed", size, overlap, "chars")
    )
    for (s1, e1), (s2, e2) in zip(raw, raw[1:]):
        assert s2 - s1 == size - overlap and e1 - s2 == overlap


@settings(max_examples=150, deadline=None)
@given(text=texts, size=sizes, data=st.data(), tokenizer=st.sampled_from(["word", "cl100k"]))
def test_fixed_tokens(text, size, data, tokenizer):
    overlap = data.draw(st.integers(0, size - 1))
    spans = chunk_text(text, ChunkingConfig("fixed", size, overlap, "tokens", tokenizer))
    tok = get_tokenizer(tokenizer)
    assert all(e > s and text[s:e].strip() for s, e in spans)
    assert not (non_space(text) & ~covered(text, spans)).any()
    token_spans = [tuple(t) for t in tok.spans(text)]
    for s, e in spans:  # a character split over several tokens gives empty spans: not counted
        assert sum(1 for ts, te in token_spans if s <= ts and te <= e and te > ts) <= size
    starts = {s: i for i, (s, _) in enumerate(token_spans)}
    if tokenizer == "word" and len(spans) > 1:
        first, second = spans[0], spans[1]
        if first[0] in starts and second[0] in starts:
            shared = [t for t in token_spans if t[0] >= second[0] and t[1] <= first[1]]
            assert len(shared) == overlap


@settings(max_examples=150, deadline=None)
@given(text=texts, size=st.integers(2, 60), data=st.data(), unit=st.sampled_from(["chars", "tokens"]))
def test_recursive(text, size, data, unit):
    overlap = data.draw(st.integers(0, size - 1))
    spans = chunk_text(text, ChunkingConfig("recursive", size, overlap, unit, "cl100k"))
    assert all(e > s and text[s:e] == text[s:e].strip() and text[s:e] for s, e in spans)
    assert not (non_space(text) & ~covered(text, spans)).any()
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)


def test_document_strategy_is_one_chunk():
    assert chunk_text("  whole doc ", ChunkingConfig("document")) == [(0, 12)]


def test_cl100k_offsets_tile_the_text():
    text = "Naïve café — 東京 tokens 🙂 done."
    spans = get_tokenizer("cl100k").spans(text)
    assert spans[0, 0] == 0 and spans[-1, 1] == len(text)
    assert (spans[1:, 0] == spans[:-1, 1]).all()


def test_recursive_known_case():
    # traced by hand through LangChain's algorithm: "." splits off as its own piece
    text = "Hello\n\nworld.\n\nThis is a test."
    spans = chunk_text(text, ChunkingConfig("recursive", 10, 0, "chars"))
    assert [text[s:e] for s, e in spans] == ["Hello", "world.", "This is a", "test", "."]


@settings(max_examples=200, deadline=None)
@given(text=texts, size=st.integers(2, 60), data=st.data())
def test_recursive_equals_langchain(text, size, data):
    """The reference implementation: LangChain's splitter gives the same chunk texts."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    overlap = data.draw(st.integers(0, size - 1))
    config = ChunkingConfig("recursive", size, overlap, "chars")
    reference = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=overlap, keep_separator=True, separators=list(config.separators)
    ).split_text(text)
    assert [text[s:e] for s, e in chunk_text(text, config)] == reference


@pytest.mark.parametrize("bad", [dict(size=0), dict(size=10, overlap=10), dict(size=10, overlap=-1)])
def test_impossible_configs(bad):
    with pytest.raises(ValueError):
        ChunkingConfig("fixed", **{"overlap": 0, **bad})


def test_sentence_windows_by_hand():
    text = 'One. Two! "Three?" Four.\n\nFive'
    spans = chunk_text(text, ChunkingConfig("sentence", 2, 1))
    assert [text[s:e] for s, e in spans] == ["One. Two!", 'Two! "Three?"', '"Three?" Four.', "Four.\n\nFive"]
    assert [text[s:e] for s, e in chunk_text(text, ChunkingConfig("sentence", 3, 0))] == [
        'One. Two! "Three?"',
        "Four.\n\nFive",
    ]
    assert ChunkingConfig("sentence", 2, 1).key() != ChunkingConfig("sentence", 2, 0).key()


@settings(max_examples=150, deadline=None)
@given(text=texts, size=st.integers(1, 6), data=st.data())
def test_sentence_windows_are_exact_and_share_overlap_sentences(text, size, data):
    from sweep.chunking.chunkers import sentences

    overlap = data.draw(st.integers(0, size - 1))
    spans = chunk_text(text, ChunkingConfig("sentence", size, overlap))
    found = sentences(text)
    assert all(text[s:e].strip() and text[s:e] == text[s:e].strip() for s, e in found)
    assert not (non_space(text) & ~covered(text, found)).any()  # every visible character in a sentence
    starts = [s for s, _ in found]
    first = [starts.index(s) for s, _ in spans]  # each window starts at a sentence
    assert first == list(range(0, len(first) * (size - overlap), size - overlap))
    for (s, e), i in zip(spans, first):
        inside = [j for j, (a, b) in enumerate(found) if s <= a and b <= e]
        assert inside == list(range(i, min(i + size, len(found))))  # size sentences (fewer at the end)


def test_markdown_sections_and_heading_paths_by_hand():
    from sweep.chunking.chunkers import chunk_sections

    text = (
        "intro\n\n# Install\nRun it.\n\n## Linux\n"
        + "apt get it. " * 10
        + "\n```\n# not a heading\n```\n# FAQ\nAsk.\n"
    )
    chunks = chunk_sections(text, ChunkingConfig("markdown", 60, 0, "chars"))
    assert all(e - s <= 60 for s, e, _ in chunks)
    paths = [p for _, _, p in chunks]
    assert paths[0] == "" and "Install" in paths and "Install > Linux" in paths and paths[-1] == "FAQ"
    faq = text.index("# FAQ")
    assert all(e <= faq or s >= faq for s, e, _ in chunks)  # nothing crosses a heading
    linux = [text[s:e] for s, e, p in chunks if p == "Install > Linux"]
    assert any("# not a heading" in t for t in linux)  # fenced code is not a heading


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(PIECES + ["\n# H\n", "\n## Sub\n", "\nT\n===\n", "\n```\n"]), max_size=120
    ).map("".join),
    size=sizes,
)
def test_markdown_chunks_are_exact_and_stay_inside_sections(text, size):
    from sweep.chunking.chunkers import chunk_sections
    from sweep.chunking.sections import sections

    found = sections(text)
    assert "".join(text[s.start : s.end] for s in found) == text  # sections tile the document
    bounds = [s.start for s in found]
    for s, e, _ in chunk_sections(text, ChunkingConfig("markdown", size, 0, "chars")):
        assert text[s:e].strip() and e - s <= max(size, 1)
        assert not any(s < b < e for b in bounds)


def test_markdown_chunker_on_the_bundled_reference_and_chromas_corpora(shared_data):
    from sweep.chunking.chunkers import chunk_sections
    from sweep.data.python_reference import python_reference_documents

    texts = [d.text for d in python_reference_documents()]
    texts += [p.read_text() for p in sorted((shared_data / "chroma-chunking" / "corpora").glob("*.md"))]
    config = ChunkingConfig("markdown", 200, 0, "tokens")
    with_headings = 0
    for text in texts:
        chunks = chunk_sections(text, config)
        assert chunks and all(text[s:e].strip() == text[s:e] for s, e, _ in chunks)
        with_headings += sum(1 for *_, p in chunks if p)
    assert with_headings > 500  # reST underlines in the reference, "= Title =" in wikitexts


def topic_embed(texts):
    """A fake sentence embedding: one axis per topic word, so neighbours on one topic are alike."""
    topics = ["cache", "install", "token"]
    out = np.array([[1.0 if w in t.lower() else 0.0 for w in topics] + [0.1] for t in texts])
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_semantic_chunks_break_at_topic_shifts_within_size():
    from sweep.chunking.semantic import semantic_groups
    from sweep.chunking.spans import sentences

    text = "The cache is shared. The cache is locked. Install it first. Install it twice. The token counts."
    config = ChunkingConfig("semantic", 200, 0, "chars", breakpoint_percentile=50)
    groups = [
        text[s:e]
        for s, e in semantic_groups(
            text, sentences(text), topic_embed([text[a:b] for a, b in sentences(text)]), config
        )
    ]
    assert groups == [
        "The cache is shared. The cache is locked.",
        "Install it first. Install it twice.",
        "The token counts.",
    ]
    small = ChunkingConfig("semantic", 25, 0, "chars", breakpoint_percentile=0)  # no topic break, size bounds
    spans = semantic_groups(
        text, sentences(text), topic_embed([text[a:b] for a, b in sentences(text)]), small
    )
    assert all(e - s <= 25 for s, e in spans) and "".join(text[s:e] for s, e in spans).replace(
        " ", ""
    ) == text.replace(" ", "")
    at_least = ChunkingConfig("semantic", 200, 0, "chars", breakpoint_percentile=50, min_size=60)
    assert (
        len(
            semantic_groups(
                text, sentences(text), topic_embed([text[a:b] for a, b in sentences(text)]), at_least
            )
        )
        == 2
    )


@settings(max_examples=100, deadline=None)
@given(text=texts, size=st.integers(5, 60), p=st.floats(0, 100))
def test_semantic_chunks_are_exact_and_bounded(text, size, p):
    from sweep.chunking.chunkers import chunk_corpus
    from sweep.data.model import Document, EvalSet

    rng = np.random.default_rng(0)

    def embed(batch):
        v = rng.normal(size=(len(batch), 4))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    chunks = chunk_corpus(
        EvalSet("t", [Document("d", text)], []),
        ChunkingConfig("semantic", size, 0, "chars", breakpoint_percentile=p),
        embed,
    )
    assert all(
        text[s:e] == t and t.strip() and e - s <= size
        for s, e, t in zip(chunks.start, chunks.end, chunks.texts)
    )
    assert not (non_space(text) & ~covered(text, zip(chunks.start, chunks.end))).any()
