"""How far two judges agree on the grades of the same passages: Cohen's kappa and the confusion table.

An eval set is only as trustworthy as its judgments. When an LLM drafted grades and a person
judged the same passages, or two people judged one session, the share of identical grades
flatters (most passages are "not relevant" to both); kappa discounts the agreement their grade
frequencies would give by chance: ``(p_observed - p_chance) / (1 - p_chance)``, 1 for perfect
agreement, 0 for chance, negative for worse. Landis & Koch's words for its ranges are a rough
guide, no more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.labeling.store import DRAFT_JUDGE, SessionState


@dataclass(frozen=True)
class Agreement:
    """Two judges on the passages both graded."""

    first: str
    second: str
    grades: tuple[int, ...]  # the scale: rows and columns of ``confusion``
    confusion: np.ndarray  # [i, j]: passages ``first`` graded grades[i] and ``second`` grades[j]
    kappa: float  # nan when there is nothing to compare or chance agreement is total

    @property
    def n(self) -> int:
        return int(self.confusion.sum())

    @property
    def observed(self) -> float:
        return float(np.trace(self.confusion) / self.n) if self.n else float("nan")

    def describe(self) -> str:
        """The kappa, the raw agreement and the confusion table, as a few lines of text."""
        head = f"{self.first} vs {self.second}: "
        if not self.n:
            return head + "no passage judged by both"
        lines = [
            head + f"Cohen's kappa {self.kappa:.3f} ({_words(self.kappa)}), {self.observed:.0%} identical, "
            f"{self.n} passage(s)"
        ]
        corner = f"{self.first} \\ {self.second}"
        width = max(6, *(len(str(g)) + 2 for g in self.grades))
        lines.append("  " + corner + "".join(f"{g:>{width}}" for g in self.grades))
        for g, row in zip(self.grades, self.confusion):
            lines.append("  " + f"{g:>{len(corner)}}" + "".join(f"{int(v):>{width}}" for v in row))
        return "\n".join(lines)


def _words(kappa: float) -> str:
    if np.isnan(kappa):
        return "undefined"
    for bound, word in (
        (0.8, "almost perfect"),
        (0.6, "substantial"),
        (0.4, "moderate"),
        (0.2, "fair"),
        (0.0, "slight"),
    ):
        if kappa > bound:
            return word
    return "no better than chance"


def cohen_kappa(first, second, grades) -> tuple[float, np.ndarray]:
    """Cohen's (unweighted) kappa of two equal-length grade sequences, and their confusion table.

    Args:
        first, second: the two judges' grades of the same items, in the same order.
        grades: the scale, in the order the table's rows and columns follow.

    Returns:
        ``(kappa, confusion)``; kappa is nan for no items, or when both judges gave one grade only
        and so chance explains everything.

    Example:
        >>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0], (0, 1))[0]
        0.5
    """
    index = {g: i for i, g in enumerate(grades)}
    confusion = np.zeros((len(grades), len(grades)), dtype=np.int64)
    for a, b in zip(first, second, strict=True):
        confusion[index[a], index[b]] += 1
    n = confusion.sum()
    if n == 0:
        return float("nan"), confusion
    observed = np.trace(confusion) / n
    chance = float((confusion.sum(axis=1) / n) @ (confusion.sum(axis=0) / n))
    if chance >= 1.0:
        return float("nan"), confusion
    return float((observed - chance) / (1 - chance)), confusion


def session_agreement(state: SessionState, grades: tuple[int, ...]) -> list[Agreement]:
    """Every pair of judges of one session on the passages both graded (the LLM's drafts first).

    A passage is one question's ``[start, end)`` of one document; each judge's latest grade of it
    counts.

    Args:
        state: the session's log, replayed (``JudgmentStore.state``).
        grades: the session's scale.

    Returns:
        One :class:`Agreement` per pair of judges that share a passage, LLM drafts against each person first.

    Example:
        >>> for a in session_agreement(store.state, store.grades):
        ...     print(a.describe())
    """
    by_judge: dict[str, dict[tuple, int]] = {}
    for key, grade in state.draft_grades.items():
        by_judge.setdefault(DRAFT_JUDGE, {})[key] = grade
    for j in sorted(state.judgments.values(), key=lambda j: j.id):
        by_judge.setdefault(j.judge, {})[(j.question, j.doc_id, j.start, j.end)] = j.grade
    names = sorted(by_judge, key=lambda n: (n != DRAFT_JUDGE, n))
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = [k for k in by_judge[a] if k in by_judge[b]]
            if not shared:
                continue
            kappa, confusion = cohen_kappa(
                [by_judge[a][k] for k in shared], [by_judge[b][k] for k in shared], grades
            )
            out.append(Agreement(a, b, tuple(grades), confusion, kappa))
    return out


__all__ = ["Agreement", "cohen_kappa", "session_agreement"]
