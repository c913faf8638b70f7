"""dataset.loader: files: a folder of Markdown, text, rst, HTML and PDF files becomes a corpus."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from sweep import DataError, load_files
from sweep.config.schema import DatasetConfig
from sweep.data.select import load_dataset

GUIDE = """---
title: Installing the tool
product: cli
tags: [setup, linux]
---
# Install

Run the installer, then restart the shell.
"""

HTML = """<!doctype html><html><head><title>Release  notes</title>
<meta name="product" content="server"><style>p { color: red }</style>
<script>var secret = "never indexed";</script></head>
<body><h1>Version 2</h1><p>The cache is now <b>shared</b>
between workers.</p><ul><li>faster start</li><li>fewer locks</li></ul>
<pre>keep   these   spaces</pre></body></html>
"""


def pdf(path: Path, text: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"pdf.fonttype": 42}):  # TrueType text: extractable
        fig = plt.figure()
        fig.text(0.1, 0.5, text)
        fig.savefig(path)
        plt.close(fig)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "guides" / "linux").mkdir(parents=True)
    (docs / "notes").mkdir()
    (docs / ".git").mkdir()
    (docs / "guides" / "linux" / "install.md").write_text(GUIDE)
    (docs / "guides" / "faq.md").write_text("Questions\n=========\n\nAsk on the forum.\n")
    (docs / "notes" / "release.html").write_text(HTML)
    (docs / "notes" / "design.rst").write_text("Design\n======\n\nOne cache per machine.\n")
    (docs / "plain.txt").write_text("A plain note about tokens.\n")
    (docs / ".git" / "HEAD.md").write_text("# hidden\n")
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n")
    pdf(docs / "notes" / "paper.pdf", "Gradient clipping bounds the update norm.")
    return docs


def test_every_format_becomes_a_document_with_id_title_and_metadata(folder, caplog):
    logger = logging.getLogger("sweep")
    caplog.set_level("INFO", logger="sweep")
    logger.addHandler(caplog.handler)  # the library's own logger, whatever its propagation
    try:
        s = load_files(folder)
    finally:
        logger.removeHandler(caplog.handler)
    assert "not read" in caplog.text and "logo.png" in caplog.text  # said, not skipped silently
    by_id = {d.id: d for d in s.documents}
    assert sorted(by_id) == [
        "guides/faq.md",
        "guides/linux/install.md",
        "notes/design.rst",
        "notes/paper.pdf",
        "notes/release.html",
        "plain.txt",
    ]  # relative paths; hidden folders and unknown suffixes left out
    guide = by_id["guides/linux/install.md"]
    assert guide.title == "Installing the tool"  # front matter wins over the heading
    assert guide.metadata == {
        "title": "Installing the tool",
        "product": "cli",
        "tags": ["setup", "linux"],
        "folder": "guides/linux",
    }
    assert guide.text == "# Install\n\nRun the installer, then restart the shell.\n"  # the body, not the YAML
    assert by_id["guides/faq.md"].title == "Questions"  # a setext heading
    assert by_id["notes/design.rst"].title == "Design"
    assert by_id["plain.txt"].title == "plain" and by_id["plain.txt"].metadata == {"folder": ""}
    html = by_id["notes/release.html"]
    assert html.title == "Release notes" and html.metadata == {"product": "server", "folder": "notes"}
    assert html.text == (
        "Version 2\n\nThe cache is now shared between workers.\n\nfaster start\n\nfewer locks\n\nkeep   these   spaces"
    )  # script and style dropped, blocks broken, whitespace collapsed outside <pre>
    assert by_id["notes/paper.pdf"].text == "Gradient clipping bounds the update norm."
    assert by_id["notes/paper.pdf"].title == "paper"


def test_one_bad_file_is_reported_by_path_and_lenient_lists_it(folder):
    bad = folder / "guides" / "broken.md"
    bad.write_bytes(b"caf\xe9 au lait\n")
    (folder / "notes" / "empty.html").write_text("<html><script>only()</script></html>")
    (folder / "notes" / "scan.pdf").write_bytes(b"%PDF-1.4 not really")
    with pytest.raises(DataError) as e:
        load_files(folder)
    message = str(e.value)
    assert f"{bad}" in message and "not UTF-8" in message
    assert "empty.html" in message and "no text" in message and "scan.pdf" in message
    lenient = load_files(folder, lenient=True)
    assert len(lenient.documents) == 6
    assert sorted(d.split(": ")[0] for d in lenient.dropped) == [
        f"file {folder / 'guides/broken.md'}",
        f"file {folder / 'notes/empty.html'}",
        f"file {folder / 'notes/scan.pdf'}",
    ]


def test_bad_front_matter_names_the_file(folder):
    (folder / "bad.md").write_text("---\ntitle: [unclosed\n---\nbody\n")
    with pytest.raises(DataError, match=r"bad\.md.*front matter is not valid YAML"):
        load_files(folder)


def test_questions_without_evidence_from_csv_and_quotes_located_in_extracted_html(folder, tmp_path):
    (tmp_path / "q.csv").write_text(
        "question,split\nHow do I install it?,tune\nWhat changed in version 2?,\n"
    )
    s = load_files(folder, tmp_path / "q.csv")
    assert [(q.id, q.text, q.evidence, q.split) for q in s.questions] == [
        ("q1", "How do I install it?", (), "tune"),
        ("q2", "What changed in version 2?", (), None),
    ]
    quote = "shared between workers"
    line = {
        "id": "w",
        "text": "Is the cache shared?",
        "evidence": [{"doc_id": "notes/release.html", "grade": 2, "quote": quote}],
    }
    (tmp_path / "q.jsonl").write_text(json.dumps(line) + "\n")
    s = load_files(folder, tmp_path / "q.jsonl")
    ev = s.questions[0].evidence[0]
    text = next(d.text for d in s.documents if d.id == "notes/release.html")
    assert text[ev.start : ev.end] == quote


def test_a_csv_without_a_question_column_is_one_error(folder, tmp_path):
    (tmp_path / "q.csv").write_text("query\nhow?\n")
    with pytest.raises(DataError, match=r"q\.csv.*'question'"):
        load_files(folder, tmp_path / "q.csv")


def test_the_loader_is_a_dataset_section_and_sweep_eval_scores_it(folder, tmp_path):
    questions = [
        {
            "id": "a",
            "text": "restart the shell after the installer",
            "evidence": [{"doc_id": "guides/linux/install.md", "grade": 1}],
        },
        {
            "id": "b",
            "text": "cache shared between workers",
            "evidence": [{"doc_id": "notes/release.html", "grade": 1}],
            "filters": {"folder": "notes"},
        },
    ]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    (tmp_path / "a.jsonl").write_text(json.dumps(questions[0]) + "\n")  # b cites an HTML file
    config = DatasetConfig(
        loader="files", path=str(folder), questions=str(tmp_path / "a.jsonl"), glob="**/*.md"
    )
    assert {d.id for d in load_dataset(config).documents} == {"guides/faq.md", "guides/linux/install.md"}
    (tmp_path / "c.yaml").write_text(
        f"dataset: {{loader: files, path: {folder}, questions: {tmp_path / 'q.jsonl'}}}\n"
        "retrieval: {mode: bm25, top_k: 3}\ncache_dir: " + str(tmp_path / "cache") + "\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "sweep", "eval", str(tmp_path / "c.yaml"), "--json", str(tmp_path / "s.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    scores = json.loads((tmp_path / "s.json").read_text())
    assert scores["per_question"]["a"]["mrr"] == 1 and scores["per_question"]["b"]["mrr"] == 1
