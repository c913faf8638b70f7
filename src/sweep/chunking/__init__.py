"""Chunking: exact-span chunkers and the tokenizers that count their units."""

from sweep.chunking.chunkers import ChunkingConfig, ChunkSet, chunk_corpus, chunk_text
from sweep.chunking.tokenizers import get_tokenizer

__all__ = ["ChunkSet", "ChunkingConfig", "chunk_corpus", "chunk_text", "get_tokenizer"]
