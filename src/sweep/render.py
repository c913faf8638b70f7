"""Plain-text tables for the terminal: metrics by cutoff, the recall@k curve and its reading."""

from __future__ import annotations

import re

from .diagnostics import curve_text, describe, diagnose


def metrics_table(means: dict[str, float]) -> str:
    """Rows are metric families, columns cutoffs; uncut metrics get their own line."""
    cut: dict[str, dict[int, float]] = {}
    uncut: dict[str, float] = {}
    for name, value in means.items():
        m = re.fullmatch(r"(.+)@(\d+)", name)
        if m:
            cut.setdefault(m.group(1), {})[int(m.group(2))] = value
        else:
            uncut[name] = value
    ks = sorted({k for row in cut.values() for k in row})
    width = max([len(f) for f in cut] + [len(f) for f in uncut] + [6])
    lines = []
    if cut:
        lines.append(" " * width + "".join(f"{'@' + str(k):>9}" for k in ks))
        for family, row in cut.items():
            cells = "".join(f"{row[k]:9.4f}" if k in row else " " * 9 for k in ks)
            lines.append(f"{family:<{width}}{cells}")
    for name, value in uncut.items():
        lines.append(f"{name:<{width}}{value:9.4f}")
    return "\n".join(lines)


def intervals_line(scores, top_k: int) -> str:
    """Bootstrap 95% intervals of the headline means: how far to trust a difference in the third decimal."""
    from .metrics.significance import bootstrap_ci

    ks = sorted(int(n.split("@")[1]) for n in scores.values if n.startswith("ndcg@"))
    k = max([x for x in ks if x <= 10] or ks or [top_k])
    names = [n for n in (f"ndcg@{k}", f"recall@{k}", "mrr") if n in scores.values]
    parts = [f"{n} [{lo:.4f}, {hi:.4f}]" for n in names for lo, hi in [bootstrap_ci(scores.values[n])]]
    return f"95% bootstrap CI ({len(scores.question_ids)} questions): " + ", ".join(parts)


def describe_result(result) -> str:
    """What ``sweep eval`` prints: dataset, stage times and cache use, metrics, recall curve."""
    c = result.config
    scores = result.scores
    lines = [
        f"{c.source}: {len(scores.question_ids)} questions"
        + (f" ({len(scores.skipped)} without relevant evidence, excluded)" if scores.skipped else "")
        + f", view: {c.evaluation.view}",
        "stages: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items()),
        "cache: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(result.counters.items())),
        "",
        metrics_table(scores.mean()),
        intervals_line(scores, c.retrieval.top_k),
        "",
        curve_text(result.recall_curve),
        "",
        describe(diagnose(result.recall_curve, scores.mean(), c.retrieval.top_k)),
    ]
    return "\n".join(lines)
