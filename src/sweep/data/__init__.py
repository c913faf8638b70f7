"""Eval sets: the data model and its loaders (native JSONL, BEIR, span CSV, a folder of files)."""

from sweep.data.beir import load_beir
from sweep.data.files import load_files
from sweep.data.jsonl import load_native
from sweep.data.model import Document, EvalSet, Evidence, Question
from sweep.data.spans import load_span_csv

__all__ = [
    "Document",
    "EvalSet",
    "Evidence",
    "Question",
    "load_beir",
    "load_files",
    "load_native",
    "load_span_csv",
]
