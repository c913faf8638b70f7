"""The library's one logger: progress and notices go to ``logging.getLogger("sweep")``, never ``print``.

Like Optuna, the library shows its own progress by default (one plain line each on stdout, so a
long sweep is never silent); an application that configures logging itself calls
:func:`use_application_logging` and receives the records through the root logger instead.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("sweep")
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


__all__ = ["logger", "show_on_stdout", "use_application_logging"]
