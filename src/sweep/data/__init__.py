"""Eval sets: the data model and its loaders (native JSONL, BEIR, span CSV)."""

from .beir import load_beir
from .jsonl import load_native
from .model import Document, EvalSet, Evidence, Question
from .spans import load_span_csv

__all__ = ["Document", "EvalSet", "Evidence", "Question", "load_beir", "load_native", "load_span_csv"]
