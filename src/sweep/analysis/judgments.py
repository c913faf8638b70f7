"""Are the labels complete enough for the comparison a sweep makes?

A pooled eval set judges only what some retriever once ranked high. A trial that ranks unjudged
chunks high is scored as if they were not relevant: its score is a lower bound, and the winner is
biased toward the retrievers that built the pool. ``judged@10`` says how much of the top 10 was
judged at all (Buckley & Voorhees 2004; ir_measures' Judged@k).
"""

from __future__ import annotations

from collections.abc import Mapping

JUDGED_ENOUGH = 0.8  # below this share of the top 10 judged, the best score is a lower bound


def judged_warning(means: Mapping[str, float], judged_nonrelevant: int, objective: str) -> str | None:
    """One line when the best trial's top 10 is judged too thinly to trust its lead, else None.

    Sets whose labels are only the relevant evidence (no judged-not-relevant item) are not pooled
    judgments, and judged@k there is just the relevant share: no warning.

    Args:
        means: the trial's mean metrics (with ``judged@10``, or the largest judged@k below 10).
        judged_nonrelevant: judged-not-relevant items in the eval set (grade 0 evidence).
        objective: the objective's name, for the message.

    Returns:
        The warning, or None.

    Example:
        >>> judged_warning({"judged@10": 0.41}, 120, "ndcg@10")[:40]
        'warning: only 41% of the best trial\\'s top'
    """
    shares = {int(k.split("@")[1]): v for k, v in means.items() if k.startswith("judged@")}
    usable = [k for k in shares if k <= 10]
    if not judged_nonrelevant or not usable:
        return None
    k = max(usable)
    if shares[k] >= JUDGED_ENOUGH:
        return None
    return (
        f"warning: only {shares[k]:.0%} of the best trial's top {k} is judged: its {objective} is a lower "
        "bound, and the comparison favours the retrievers that built the pool: judge what the best "
        "configuration ranks high (python -m sweep label CONFIG --from-study STUDY), then sweep again"
    )


__all__ = ["JUDGED_ENOUGH", "judged_warning"]
