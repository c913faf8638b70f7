"""Span primitives the chunkers share: sentences, windows, LangChain's recursive split, all as
``[start, end)`` offsets of the one text, so no chunker ever copies or rewrites text."""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from sweep.chunking.tokenizers import Tokenizer, get_tokenizer


def length_of(text: str, config) -> Callable[[int, int], int]:
    if config.unit == "chars":
        return lambda s, e: e - s
    tokenizer: Tokenizer = get_tokenizer(config.tokenizer)
    return lambda s, e: tokenizer.count(text[s:e])


_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s)|\n[ \t]*\n")


def sentences(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of each sentence, surrounding whitespace left out.

    Args:
        text: a document's text.

    Returns:
        The spans, in order; none empty.

    Example:
        >>> sentences("One. Two!  Three")
        [(0, 4), (5, 9), (11, 16)]
    """
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append(strip(text, start, m.end()))
        start = m.end()
    spans.append(strip(text, start, len(text)))
    return [(a, b) for a, b in spans if b > a]


def windows(starts: np.ndarray, ends: np.ndarray, size: int, step: int):
    n = len(starts)
    first = 0
    while first < n:
        last = min(first + size, n)
        yield starts[first], ends[last - 1]
        if last == n:
            return
        first += step


def split(text, start, end, separators, config, length):
    """LangChain's ``_split_text`` on spans: separators stay with the piece after them."""
    separator, rest = separators[-1], []
    for i, sep in enumerate(separators):
        if sep == "":
            separator = sep
            break
        if text.find(sep, start, end) >= 0:
            separator, rest = sep, separators[i + 1 :]
            break
    chunks, good = [], []
    for piece in _pieces(text, start, end, separator):
        n = length(*piece)
        if n < config.size:
            good.append((piece, n))
            continue
        if good:
            chunks.extend(_merge(text, good, config))
            good = []
        if rest:
            chunks.extend(split(text, piece[0], piece[1], rest, config, length))
        else:
            chunks.append(piece)
    if good:
        chunks.extend(_merge(text, good, config))
    return chunks


def _pieces(text: str, start: int, end: int, separator: str) -> list[tuple[int, int]]:
    if separator == "":
        return [(i, i + 1) for i in range(start, end)]
    cuts = [m.start() for m in re.finditer(re.escape(separator), text[start:end])]
    bounds = [start] + [start + c for c in cuts if c > 0] + [end]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _merge(text, pieces, config):
    """LangChain's ``_merge_splits`` with an empty join separator, on spans."""
    out, current, total = [], [], 0
    for piece, n in pieces:
        if total + n > config.size and current:
            out.append(strip(text, current[0][0][0], current[-1][0][1]))
            while total > config.overlap or (total + n > config.size and total > 0):
                total -= current.pop(0)[1]
        current.append((piece, n))
        total += n
    if current:
        out.append(strip(text, current[0][0][0], current[-1][0][1]))
    return out


def strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


__all__ = ["length_of", "sentences", "split", "strip", "windows"]
