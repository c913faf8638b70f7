"""A query rewriter loaded by import path in test_query.py; counts its calls in a file beside the cache."""

from __future__ import annotations

import os
from pathlib import Path

SYNONYMS = {"mutable": "lists change", "immutable": "tuples fixed"}


def rewrite(text: str) -> list[str]:
    counter = Path(os.environ["REWRITER_CALLS"])
    counter.write_text(str(int(counter.read_text() or 0) + 1) if counter.exists() else "1")
    extra = [v for k, v in SYNONYMS.items() if k in text.split()]
    return [text, *extra]


def broken(text: str):
    return 42
