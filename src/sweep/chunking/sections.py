"""Structure-aware chunking: split on headings, then bound each section by size.

Headings are found in the three forms the bundled and shared corpora use: Markdown's ``# Title``
(ATX; lines inside fenced code are not headings), a title underlined with a run of ``=``, ``-``,
``*``, ``~``, ``^`` or ``+`` (Markdown setext and reStructuredText, levels in the order the
underline characters first appear, as reST assigns them), and wikitext's ``= Title =`` /
``= = Title = =``. A section runs from its heading to the next heading; a section longer than
``size`` is split further by the recursive splitter, inside the section. Each chunk carries its
heading path (``"Install > Linux"``), which ``chunking.heading_prefix`` puts before the indexed text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_UNDERLINE = re.compile(r"^([=\-*~^+])\1{2,}[ \t]*$")
_WIKI = re.compile(r"^ ?((?:= ?)+) (.+?) ((?:= ?)+)$")


@dataclass(frozen=True)
class Section:
    """``[start, end)`` of a document from one heading to the next, and the heading path above it."""

    start: int
    end: int
    path: str


def sections(text: str) -> list[Section]:
    """The document's sections in order; text before the first heading is a section with path ``""``.

    Args:
        text: a document's text.

    Returns:
        Sections covering the whole text, none empty.

    Example:
        >>> [(s.path, text[s.start:s.end]) for s in sections(text := "# A\\nx\\n## B\\ny\\n")]
        [('A', '# A\\nx\\n'), ('A > B', '## B\\ny\\n')]
    """
    lines = text.splitlines(keepends=True)
    offsets, at = [], 0
    for line in lines:
        offsets.append(at)
        at += len(line)
    heads: list[tuple[int, int, str]] = []  # (offset, level, title)
    underline_levels: dict[str, int] = {}
    fenced = False
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        if m := _ATX.match(line):
            heads.append((offsets[i], len(m.group(1)), m.group(2).strip()))
        elif (m := _WIKI.match(line)) and m.group(1).count("=") == m.group(3).count("="):
            heads.append((offsets[i], m.group(1).count("="), m.group(2).strip()))
        elif i + 1 < len(lines) and line.strip() and not _UNDERLINE.match(line):
            below = _UNDERLINE.match(lines[i + 1].rstrip("\r\n"))
            if below and len(lines[i + 1].strip()) >= len(line.strip()) * 0.5:
                level = underline_levels.setdefault(below.group(1), len(underline_levels) + 1)
                heads.append((offsets[i], level, line.strip()))
    out, stack = [], []  # stack: (level, title) of the headings above
    starts = [0] + [h[0] for h in heads if h[0] > 0]
    paths = [""] if not heads or heads[0][0] > 0 else []
    for _, level, title in heads:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        paths.append(" > ".join(t for _, t in stack))
    ends = starts[1:] + [len(text)]
    for start, end, path in zip(starts, ends, paths):
        if end > start:
            out.append(Section(start, end, path))
    return out


__all__ = ["Section", "sections"]
