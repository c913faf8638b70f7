"""Tokenizers that report character offsets, so token chunks keep exact spans.

Three kinds, named in configs as ``word``, ``cl100k`` (OpenAI's, through the
offline ``bpe-openai`` package; Chroma's chunk sizes are in these tokens) and
``model:<name or path>`` (an embedding model's own tokenizer).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Protocol

import numpy as np

from sweep.errors import ConfigError

WORD_PATTERN = re.compile(r"\w+|[^\w\s]")


class Tokenizer(Protocol):
    name: str

    def spans(self, text: str) -> np.ndarray:
        """``(n_tokens, 2)`` int array of ``[start, end)`` character offsets."""

    def count(self, text: str) -> int: ...


class WordTokenizer:
    """Words and single punctuation marks; whitespace is never a token."""

    name = "word"

    def spans(self, text: str) -> np.ndarray:
        found = [m.span() for m in WORD_PATTERN.finditer(text)]
        return np.array(found, dtype=np.int64).reshape(-1, 2)

    def count(self, text: str) -> int:
        return sum(1 for _ in WORD_PATTERN.finditer(text))


class Cl100kTokenizer:
    """OpenAI's cl100k_base; tokens tile the text, so spans are contiguous."""

    name = "cl100k"

    def __init__(self) -> None:
        import bpe_openai

        self._enc = bpe_openai.get_encoding("cl100k_base")

    def spans(self, text: str) -> np.ndarray:
        tokens = self._enc.encode(text, disallowed_special=())
        if not tokens:
            return np.zeros((0, 2), dtype=np.int64)
        byte_len = np.fromiter(
            (len(self._enc.decode_single_token_bytes(t)) for t in tokens), np.int64, len(tokens)
        )
        byte_end = np.cumsum(byte_len)
        data = text.encode("utf-8")
        # char index of each byte: count of UTF-8 lead bytes before it
        lead = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
        char_of_byte = np.concatenate([[0], np.cumsum(lead)])  # char index at byte offset b (ceil)
        ends = char_of_byte[byte_end]
        starts = np.concatenate([[0], ends[:-1]])
        return np.stack([starts, ends], axis=1)

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))


class ModelTokenizer:
    """A Hugging Face tokenizer (an embedding model's), special tokens left out."""

    def __init__(self, name_or_path: str):
        from transformers import AutoTokenizer

        from sweep.models import resolve_model

        self.name = f"model:{name_or_path}"
        self._tok = AutoTokenizer.from_pretrained(resolve_model(name_or_path))

    def spans(self, text: str) -> np.ndarray:
        enc = self._tok(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return np.array(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)

    def count(self, text: str) -> int:
        return len(self._tok(text, add_special_tokens=False, verbose=False)["input_ids"])


@lru_cache(maxsize=8)
def get_tokenizer(name: str) -> Tokenizer:
    if name == "word":
        return WordTokenizer()
    if name == "cl100k":
        return Cl100kTokenizer()
    if name.startswith("model:"):
        return ModelTokenizer(name.removeprefix("model:"))
    raise ConfigError(
        "", "chunking.tokenizer", f"unknown tokenizer {name!r}", ["use word, cl100k or model:<name>"]
    )
