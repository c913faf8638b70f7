"""Plain-text tables for the terminal: metrics by cutoff, the recall@k curve and its reading."""

from __future__ import annotations

import math
import re

from sweep.analysis.diagnostics import curve_text, describe, diagnose
from sweep.analysis.verdict import describe_verdict
from sweep.errors import mask_url
from sweep.outputs.run_view import trials_view_url, ui_command


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
    from sweep.analysis.significance import bootstrap_ci

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
        *([f"encoding: {result.encode_texts_per_s:.0f} texts/s"] if result.encode_texts_per_s else []),
        "",
        metrics_table(scores.mean()),
        intervals_line(scores, c.retrieval.top_k),
        "",
        curve_text(result.recall_curve),
        "",
        describe(diagnose(result.recall_curve, scores.mean(), c.retrieval.top_k)),
    ]
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines + dropped_lines(result.dropped))


def dropped_lines(dropped: list[str]) -> list[str]:
    """What --lenient left out, every item, so a smaller eval set is never a silent one."""
    if not dropped:
        return []
    docs = sum(d.startswith("document ") for d in dropped)
    lines = sum(d.startswith("line ") for d in dropped)
    head = (
        f"--lenient dropped {len(dropped) - docs - lines} question(s), {docs} document(s) and {lines} unreadable "
        "line(s):"
    )
    return [head, *(f"  {d}" for d in dropped)]


def describe_sweep(result, objective: str) -> str:
    lines = [
        "",
        f"best trial: {objective} = {result.best_value:.4f}"
        + (
            f"  (baseline {result.baseline_value:.4f}, {result.best_value - result.baseline_value:+.4f})"
            if result.baseline_value is not None and not math.isnan(result.baseline_value)
            else ""
        ),
    ]
    lines += [
        f"  {k} = {v:.10g}" if isinstance(v, float) else f"  {k} = {v}" for k, v in result.best_params.items()
    ]
    if getattr(result, "selection", None) is not None:
        lines.append("  " + result.selection.describe(objective))
    if len(result.pareto_trials) > 1:
        lines.append(f"Pareto front: trials {', '.join(map(str, sorted(result.pareto_trials)))}")
    if result.failures:
        lines.append(f"{len(result.failures)} failed trial(s):")
        lines += [f"  {f}" for f in result.failures]
    if result.verdict is not None:
        lines += ["", describe_verdict(result.verdict), ""]
    lines.append(f"{result.n_complete} complete trials in study {result.study_name!r}")
    if result.tracking_uri.startswith(("http://", "https://")):
        lines.append(
            f"compare the trials in MLflow:  {trials_view_url(mask_url(result.tracking_uri), result.experiment_id, result.view_key)}"
        )
    else:
        lines += [
            f"open the MLflow UI on this store:  {ui_command(mask_url(result.tracking_uri))}",
            f"  then compare the trials at  {trials_view_url('http://127.0.0.1:5000', result.experiment_id, result.view_key)}",
        ]
    if result.report_path is not None:
        lines.append(f"report: {result.report_path}")
    return "\n".join(lines)


def trial_lines(
    trial, done: int, target: int, best, objective: str, extra_objectives: list[str]
) -> list[str]:
    """The sweep's progress line for a finished trial (and its failure reason, if it failed)."""
    head = f"[{done:>3}/{target}] trial {trial.number:>3}"
    if trial.user_attrs.get("fail_kind") == "duplicate":
        return [f"{head} repeats trial {trial.user_attrs.get('duplicate_of')}: answered from it, not counted"]
    best_text = f"best {best.values[0]:.4f} (#{best.number})" if best else "no complete trial yet"
    value = f"{trial.values[0]:.4f}" if trial.values else trial.state.name.lower()
    if trial.values and len(trial.values) > 1:
        value += " " + " ".join(f"{n}={v:.4g}" for n, v in zip(extra_objectives, trial.values[1:]))
    if trial.state.name == "PRUNED":
        value = f"pruned after {trial.user_attrs.get('questions_evaluated')} questions"
        if trial.user_attrs.get("screened_out"):
            pool = trial.user_attrs["screen"]
            value = (
                f"screened out at {pool['value']:.4f} on a pool of {pool['pool']} of {pool['chunks']} chunks"
            )
    short = " ".join(
        f"{k.rsplit('.', 1)[-1]}={v:g}" if isinstance(v, float) else f"{k.rsplit('.', 1)[-1]}={v}"
        for k, v in trial.params.items()
    )
    took = trial.user_attrs.get("seconds")
    lines = [
        f"{head} {objective} {value}  {best_text}  {short}" + (f"  ({took:.2f}s)" if took is not None else "")
    ]
    if trial.state.name == "FAIL":
        lines.append(
            f"      trial {trial.number} failed: {trial.user_attrs.get('error', 'see the log above')}"
        )
    return lines
