"""The project's own error types.

Every problem a user can fix (a bad config key, a malformed eval-set line)
surfaces as a :class:`SweepError` whose message names *where* (file, line,
key) and *what to do*, so the CLI can print it without a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class SweepError(Exception):
    """Base class: a user-facing problem with a message that says what to fix."""


@dataclass(frozen=True)
class Problem:
    """One located problem in an input file."""

    file: str
    message: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f" [{self.field}]"
        return f"{where}: {self.message}"


class DataError(SweepError):
    """An eval-set file is missing or malformed; carries every problem found."""

    def __init__(self, problems: list[Problem] | Problem, *, shown: int = 20, hint: str = ""):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        lines = [str(p) for p in self.problems[:shown]]
        if len(self.problems) > shown:
            lines.append(f"... and {len(self.problems) - shown} more")
        counts: dict[str, int] = {}
        for p in self.problems:
            counts[p.file] = counts.get(p.file, 0) + 1
        head = ", ".join(f"{n} in {f}" for f, n in counts.items())
        if len(self.problems) == 1:  # one problem: one line
            super().__init__(lines[0] + (f" ({hint})" if hint else ""))
            return
        text = f"{len(self.problems)} problem(s) in the eval set ({head}):\n  " + "\n  ".join(lines)
        super().__init__(text + (f"\n  ({hint})" if hint else ""))


@dataclass
class ConfigError(SweepError):
    """A config file or override is invalid; ``key`` is the dotted key path."""

    file: str
    key: str
    message: str
    hints: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        where = f"{self.file}: {self.key}" if self.key else self.file
        text = f"{where}: {self.message}"
        if self.hints:
            text += " (" + "; ".join(self.hints) + ")"
        super().__init__(text)

    def __str__(self) -> str:  # dataclass would otherwise replace Exception.__str__
        return self.args[0]

    def located(self, file: str, key: str | None = None) -> "ConfigError":
        """The same error naming the config file (and a fuller key path) it came from."""
        return ConfigError(self.file or file, key or self.key, self.message, list(self.hints))


def mask_url(url: str) -> str:
    """The URL with its password replaced by ``***``, for every line we print or log.

    Args:
        url: a storage or tracking URL, e.g. ``postgresql://user:secret@host/db``.

    Returns:
        ``postgresql://user:***@host/db``; a URL without a password unchanged.

    Example:
        >>> mask_url("postgresql://me:pw@db:5432/optuna")
        'postgresql://me:***@db:5432/optuna'
    """
    import re

    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*):[^@/]*@", r"\1:***@", url)
