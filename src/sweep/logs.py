"""The library's one logger: progress and notices go to ``logging.getLogger("sweep")``, never ``print``.

Like Optuna, the library shows its own progress by default (one plain line each on stdout, so a
long sweep is never silent); an application that configures logging itself calls
:func:`use_application_logging` and receives the records through the root logger instead.
"""

from __future__ import annotations

import io
import logging
import sys
import time

from tqdm import tqdm as _plain_tqdm
from tqdm.auto import tqdm as _auto_tqdm

logger = logging.getLogger("sweep")
LINE_SECONDS = 10.0  # without a terminal, a progress bar says a line at most this often
_application_owns_output = False


class _StdoutHandler(logging.StreamHandler):
    """Writes each message, and nothing else, to whatever ``sys.stdout`` is at the time."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):  # the current stdout: a redirected or captured stream gets the lines
        return sys.stdout

    @stream.setter
    def stream(self, value) -> None:
        pass


def show_on_stdout() -> None:
    """Show the library's messages as plain lines on stdout (what the CLI and ``Sweep`` do; idempotent).

    Returns:
        None.

    Example:
        >>> show_on_stdout()
        >>> logger.info("trial 3: ndcg@10 0.612")  # printed as is
    """
    if not any(isinstance(h, _StdoutHandler) for h in logger.handlers):
        logger.addHandler(_StdoutHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def use_application_logging() -> None:
    """Hand the library's records to the application's logging configuration instead of stdout.

    Returns:
        None.

    Example:
        >>> import logging; logging.basicConfig(level=logging.INFO)
        >>> use_application_logging()
    """
    global _application_owns_output
    _application_owns_output = True
    for handler in [h for h in logger.handlers if isinstance(h, _StdoutHandler)]:
        logger.removeHandler(handler)
    logger.propagate = True


def default_output() -> None:
    """What the library does before it speaks: stdout, unless the application took the records."""
    if not _application_owns_output:
        show_on_stdout()


class _LineBar(_plain_tqdm):
    """A progress bar for a log file or a CI job: a plain line through the logger every
    :data:`LINE_SECONDS` at most, and a last one when it closes, instead of a redraw on every update
    (which, without a terminal, is a new line each time)."""

    def __init__(self, *args, **kwargs):
        self._last_line, self._closing = 0.0, False
        kwargs.update(file=io.StringIO(), mininterval=LINE_SECONDS, ncols=0, dynamic_ncols=False)
        super().__init__(*args, **kwargs)

    def display(self, msg=None, pos=None) -> bool:
        now = time.monotonic()
        if self.n and (self._closing or now - self._last_line >= LINE_SECONDS):
            self._last_line = now
            logger.info(self.format_meter(**self.format_dict))
        self.fp.seek(0)
        self.fp.truncate()  # what tqdm itself writes goes nowhere
        return True

    def close(self) -> None:
        if not self.disable and not self._closing:
            self._closing = True
            self._last_line = 0.0
        super().close()


def progress_bar(*args, **kwargs):
    """A tqdm bar: redrawn in place on a terminal or in a notebook, a line every few seconds elsewhere.

    Args:
        *args, **kwargs: tqdm's (``total``, ``desc``, ``unit``, ``disable``, ``leave``, ...).

    Returns:
        The bar (a context manager, like any tqdm).

    Example:
        >>> with progress_bar(total=3, desc="embedding chunks", unit="text") as bar:
        ...     bar.update(3)
    """
    notebook = any(c.__module__ == "tqdm.notebook" for c in _auto_tqdm.__mro__)  # tqdm.auto's choice
    terminal = notebook or getattr(sys.stderr, "isatty", lambda: False)()
    return _auto_tqdm(*args, **kwargs) if terminal else _LineBar(*args, **kwargs)


__all__ = ["LINE_SECONDS", "logger", "progress_bar", "show_on_stdout", "use_application_logging"]
