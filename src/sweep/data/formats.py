"""One file as one document: text, title and metadata by format (Markdown, text, rst, HTML, PDF).

HTML is read with a real parser (``html.parser``): script, style and template contents are dropped,
block elements become paragraph breaks, ``<meta name>`` pairs become metadata. Markdown's YAML front
matter becomes metadata and is not part of the text (evidence offsets count from the body).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import yaml

from sweep.data.model import Document
from sweep.errors import DataError
from sweep.textfile import read_text

TEXT_SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "rst"}
HTML_SUFFIXES = {".html", ".htm"}
SUFFIXES = set(TEXT_SUFFIXES) | HTML_SUFFIXES | {".pdf"}
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?---[ \t]*(\n|\Z)", re.S)
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
_RST_RULE = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}[ \t]*$")


class Unreadable(Exception):
    """One file's problem, as the message a user reads next to its path."""


def read_document(path: Path, folder: Path) -> Document:
    """One file as a document: id = path relative to ``folder``, title = front matter ``title``, else
    the first heading (or HTML ``<title>``), else the file name; metadata gains ``folder``.

    Args:
        path: the file.
        folder: the corpus folder it lies in.

    Returns:
        The :class:`Document`.

    Raises:
        Unreadable: the file's one problem (not UTF-8, bad front matter, no text, broken PDF).

    Example:
        >>> read_document(Path("docs/guides/setup.md"), Path("docs")).id  # doctest: +SKIP
        'guides/setup.md'
    """
    relative = path.relative_to(folder)
    suffix = path.suffix.lower()
    metadata: dict[str, Any] = {}
    if suffix == ".pdf":
        text, title = _pdf_text(path), None
    elif suffix in HTML_SUFFIXES:
        text, title, metadata = _html_text(_text_of(path))
    else:
        raw = _text_of(path)
        kind = TEXT_SUFFIXES[suffix]
        if kind == "markdown":
            metadata, raw = _front_matter(raw)
        text = raw.replace("\r\n", "\n")
        title = _markdown_title(text) if kind == "markdown" else _rst_title(text) if kind == "rst" else None
    if not text.strip():
        raise Unreadable(
            "no text in this file" + (" (a scanned PDF needs OCR first)" if suffix == ".pdf" else "")
        )
    title = str(metadata.get("title") or title or path.stem)
    folder_name = relative.parent.as_posix()
    return Document(
        relative.as_posix(), text, title, {**metadata, "folder": "" if folder_name == "." else folder_name}
    )


def _text_of(path: Path) -> str:
    try:
        return read_text(path)
    except DataError as e:
        raise Unreadable(e.problems[0].message if e.problems else str(e)) from None


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    """YAML between ``---`` lines at the very top: the metadata, and the text after it."""
    match = _FRONT_MATTER.match(text.replace("\r\n", "\n"))
    if not match:
        return {}, text
    try:
        data = yaml.safe_load(match.group(1) or "") or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise Unreadable(f"front matter is not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise Unreadable("front matter must be a YAML mapping (key: value lines between the --- lines)")
    return {str(k): v for k, v in data.items()}, text.replace("\r\n", "\n")[match.end() :]


def _markdown_title(text: str) -> str | None:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if m := _ATX.match(line):
            return m.group(1).strip()
        if line.strip() and i + 1 < len(lines) and re.fullmatch(r" {0,3}(=+|-+)[ \t]*", lines[i + 1]):
            return line.strip()  # a setext heading: the line above === or ---
    return None


def _rst_title(text: str) -> str | None:
    lines = text.split("\n")
    for i in range(len(lines) - 1):
        line, below = lines[i].strip(), lines[i + 1]
        if (
            line
            and not _RST_RULE.match(lines[i])
            and _RST_RULE.match(below)
            and len(below.strip()) >= len(line)
        ):
            return line
    return None


BLOCK = {
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "td",
    "th",
    "tr",
    "ul",
}
HIDDEN = {"script", "style", "template", "noscript", "head"}


class _TextParser(HTMLParser):
    """Visible text with paragraph breaks; the ``<title>`` (or first ``<h1>``) and ``<meta name>`` pairs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[list[str]] = [[]]
        self.hidden = 0
        self.pre = 0
        self.title: str | None = None
        self.h1: list[str] | None = None
        self.in_title = False
        self.title_parts: list[str] = []
        self.meta: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
        elif tag == "meta":
            a = dict(attrs)
            if a.get("name") and a.get("content") is not None:
                self.meta[a["name"]] = a["content"]
        if tag in HIDDEN and tag != "head":
            self.hidden += 1
        if tag in BLOCK:
            self.blocks.append([])
        if tag == "pre":
            self.pre += 1
        if tag == "h1" and self.h1 is None:
            self.h1 = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in HIDDEN and tag != "head":
            self.hidden = max(0, self.hidden - 1)
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag in BLOCK:
            self.blocks.append([])
        if tag == "h1" and self.h1 is not None and self.title is None:
            self.title = " ".join("".join(self.h1).split()) or None

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
            return
        if self.hidden:
            return
        self.blocks[-1].append(data if self.pre else re.sub(r"\s+", " ", data))
        if self.h1 is not None and self.title is None:
            self.h1.append(data)


def _html_text(html: str) -> tuple[str, str | None, dict[str, Any]]:
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    paragraphs = ["".join(parts).strip() for parts in parser.blocks]
    text = "\n\n".join(p for p in paragraphs if p)
    title = " ".join("".join(parser.title_parts).split()) or parser.title
    return text, title, dict(parser.meta)


def _pdf_text(path: Path) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:  # pragma: no cover - pypdf is a dependency
        raise Unreadable("reading PDFs needs pypdf: pip install pypdf") from None
    try:
        reader = PdfReader(path)
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as e:
        raise Unreadable(f"not a readable PDF ({type(e).__name__}: {e})"[:300]) from None
    return "\n\n".join(p for p in pages if p)


__all__ = ["SUFFIXES", "Unreadable", "read_document"]
