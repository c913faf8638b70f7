"""Progress without a terminal: a log file or a CI job gets a few plain lines, not a redraw per update."""

from __future__ import annotations

import logging
import time

import sweep.logs as logs


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_without_a_terminal_a_bar_says_a_line_every_few_seconds_and_a_last_one(monkeypatch, capfd):
    monkeypatch.setattr(logs, "LINE_SECONDS", 0.1)
    handler = Lines()
    logs.logger.addHandler(handler)
    monkeypatch.setattr(logs.logger, "level", logging.INFO)
    try:
        started = time.monotonic()
        with logs.progress_bar(total=200, desc="embedding chunks", unit="text", leave=False) as bar:
            for _ in range(200):
                time.sleep(0.005)
                bar.update(1)
                bar.refresh()  # what the cache does as rows land: still at most a line per interval
        seconds = time.monotonic() - started
    finally:
        logs.logger.removeHandler(handler)
    lines = handler.lines
    assert 2 <= len(lines) <= seconds / 0.1 + 2  # 200 updates, a handful of lines
    assert all(line.startswith("embedding chunks:") and "\r" not in line for line in lines)
    assert lines[-1].startswith("embedding chunks: 100% 200/200")  # the last line is the end
    assert capfd.readouterr().err == ""  # tqdm's own redraws went nowhere


def test_a_bar_that_never_moved_or_is_disabled_says_nothing(monkeypatch, capfd):
    handler = Lines()
    logs.logger.addHandler(handler)
    monkeypatch.setattr(logs.logger, "level", logging.INFO)
    try:
        with logs.progress_bar(total=5, desc="idle"):
            pass
        with logs.progress_bar(total=5, desc="off", disable=True) as bar:
            bar.update(5)
    finally:
        logs.logger.removeHandler(handler)
    assert handler.lines == []
    assert capfd.readouterr().err == ""
