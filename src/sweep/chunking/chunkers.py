"""Chunkers that return exact character spans of their document.

Every chunk is ``(doc, start, end)`` with ``document.text[start:end] == chunk.text``,
which is what lets span labels be resolved onto any chunking (labels.py).

Strategies:

* ``fixed``: windows of ``size`` units, consecutive windows sharing exactly
  ``overlap`` units (chars, or tokens of the configured tokenizer).
* ``recursive``: LangChain's recursive splitter (as used by Chroma's chunking
  study): split on the first separator present (paragraph, line, sentence
  marks, space, character), recurse into pieces still too long, then merge
  pieces greedily up to ``size`` units carrying up to ``overlap`` units back,
  and strip surrounding whitespace.
* ``sentence``: windows of ``size`` sentences, consecutive windows sharing
  ``overlap`` sentences. A sentence ends at ``.``, ``!`` or ``?`` (with any
  closing quotes or brackets) before whitespace, or at a blank line; the rule
  is plain, so "e.g. this" splits after "e.g.".
* ``markdown``: sections split on headings (:mod:`sweep.chunking.sections`),
  each bounded by ``size`` units with the recursive splitter; chunks never
  cross a heading and keep their heading path (``ChunkSet.headings``).
* ``semantic``: sentences grouped until the embedding similarity of two
  neighbours drops below the document's ``breakpoint_percentile``-th
  percentile (a topic shift), each chunk at least ``min_size`` and at most
  ``size`` units (a longer sentence is split by the recursive splitter). The
  sentence embeddings come from the pipeline's cached encoder (``embed``).
* ``document``: one chunk per document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import numpy as np

from sweep.chunking.sections import sections
from sweep.chunking.semantic import semantic_chunks, semantic_groups
from sweep.chunking.spans import length_of, sentences, split, strip, windows
from sweep.chunking.tokenizers import get_tokenizer
from sweep.data.model import EvalSet

DEFAULT_SEPARATORS = ("\n\n", "\n", ".", "?", "!", " ", "")


@dataclass(frozen=True)
class ChunkingConfig:
    strategy: Literal["fixed", "recursive", "sentence", "markdown", "semantic", "document"] = "document"
    size: int = 200
    overlap: int = 0
    unit: Literal["chars", "tokens"] = "tokens"
    tokenizer: str = "word"
    separators: tuple[str, ...] = DEFAULT_SEPARATORS
    heading_prefix: bool = False  # markdown: the heading path goes before the indexed text
    model: str = "minilm-l6"  # semantic: the sentence embedding model
    breakpoint_percentile: float = 20.0  # semantic: neighbours less similar than this percentile break
    min_size: int = 1  # semantic: no break before a chunk has this many units

    def __post_init__(self) -> None:
        if self.strategy != "document":
            if self.size < 1:
                raise ValueError(f"chunk size must be >= 1, got {self.size}")
            if not 0 <= self.overlap < self.size:
                raise ValueError(
                    f"overlap must be in [0, size), got overlap {self.overlap} with size {self.size}"
                )

    def key(self) -> str:
        if self.strategy == "document":
            return "document"
        if self.strategy == "sentence":
            return f"sentence:{self.size}:{self.overlap}"
        if self.strategy == "semantic":
            unit = self.unit if self.unit == "chars" else f"tokens:{self.tokenizer}"
            return f"semantic:{self.size}:{self.min_size}:{unit}:{self.model}:{self.breakpoint_percentile}"
        unit = self.unit if self.unit == "chars" else f"tokens:{self.tokenizer}"
        extra = f":{self.separators!r}" if self.strategy in ("recursive", "markdown") else ""
        extra += ":headings" if self.strategy == "markdown" and self.heading_prefix else ""
        return f"{self.strategy}:{self.size}:{self.overlap}:{unit}{extra}"


@dataclass
class ChunkSet:
    """All chunks of a corpus as parallel arrays (what labels and retrievers need)."""

    doc: np.ndarray  # int64 index into EvalSet.documents
    start: np.ndarray  # int64, inclusive
    end: np.ndarray  # int64, exclusive
    texts: list[str]
    key: str = field(default="")
    headings: list[str] = field(default_factory=list)  # markdown: each chunk's heading path

    def __len__(self) -> int:
        return len(self.texts)


def chunk_text(text: str, config: ChunkingConfig) -> list[tuple[int, int]]:
    """``[start, end)`` spans of ``text``; never empty, never whitespace only."""
    if config.strategy == "document":
        spans = [(0, len(text))]
    elif config.strategy == "fixed":
        spans = _fixed(text, config)
    elif config.strategy == "recursive":
        spans = _recursive(text, config)
    elif config.strategy == "markdown":
        spans = [(a, b) for a, b, _ in chunk_sections(text, config)]
    elif config.strategy == "semantic":
        raise ValueError("the semantic chunker embeds sentences: use chunk_corpus(..., embed=)")
    elif config.strategy == "sentence":
        found = sentences(text)
        starts, ends = np.array([a for a, _ in found], np.int64), np.array([b for _, b in found], np.int64)
        spans = [
            (int(a), int(b)) for a, b in windows(starts, ends, config.size, config.size - config.overlap)
        ]
    else:
        raise ValueError(f"unknown chunking strategy {config.strategy!r}")
    return [(s, e) for s, e in spans if e > s and text[s:e].strip()]


def chunk_corpus(
    eval_set: EvalSet, config: ChunkingConfig, embed: Callable[[list[str]], np.ndarray] | None = None
) -> ChunkSet:
    """Chunk every document; ``embed`` (texts -> unit vectors) is needed by the semantic chunker only."""
    docs, starts, ends, texts, headings = [], [], [], [], []
    grouped = semantic_chunks(eval_set, config, embed) if config.strategy == "semantic" else None
    for i, document in enumerate(eval_set.documents):
        if grouped is not None:
            found = [(s, e, "") for s, e in grouped[i]]
        elif config.strategy == "markdown":
            found = chunk_sections(document.text, config)
        else:
            found = [(s, e, "") for s, e in chunk_text(document.text, config)]
        for s, e, path in found:
            docs.append(i)
            starts.append(s)
            ends.append(e)
            texts.append(document.text[s:e])
            headings.append(path)
    as_array = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
    paths = headings if config.strategy == "markdown" else []
    return ChunkSet(as_array(docs), as_array(starts), as_array(ends), texts, key=config.key(), headings=paths)


def chunk_sections(text: str, config: ChunkingConfig) -> list[tuple[int, int, str]]:
    """Markdown chunks: ``(start, end, heading path)``; a section over ``size`` is split inside itself.

    Args:
        text: a document's text.
        config: a ``markdown`` chunking (size, overlap and unit bound each piece).

    Returns:
        Spans in order, none empty or whitespace only, none across a heading.

    Example:
        >>> chunk_sections("# A\nshort\n", ChunkingConfig("markdown", 50, 0, "chars"))
        [(0, 9, 'A')]
    """
    length = length_of(text, config)
    out = []
    for section in sections(text):
        if length(section.start, section.end) <= config.size:
            pieces = [strip(text, section.start, section.end)]
        else:
            pieces = split(text, section.start, section.end, list(config.separators), config, length)
        out += [(s, e, section.path) for s, e in pieces if e > s and text[s:e].strip()]
    return out


def _fixed(text: str, config: ChunkingConfig) -> list[tuple[int, int]]:
    step = config.size - config.overlap
    if config.unit == "chars":
        bounds = np.arange(len(text) + 1)
        return [(int(a), int(b)) for a, b in windows(bounds[:-1], bounds[1:], config.size, step)]
    spans = get_tokenizer(config.tokenizer).spans(text)
    return [(int(a), int(b)) for a, b in windows(spans[:, 0], spans[:, 1], config.size, step)]


def _recursive(text: str, config: ChunkingConfig) -> list[tuple[int, int]]:
    return split(text, 0, len(text), list(config.separators), config, length_of(text, config))


__all__ = [
    "ChunkSet",
    "ChunkingConfig",
    "chunk_corpus",
    "chunk_sections",
    "chunk_text",
    "get_tokenizer",
    "semantic_groups",
    "sentences",
]
