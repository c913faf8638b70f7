"""A gate's decision as a CI job wants it: Markdown for the job summary, JUnit XML for the test tab."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from sweep.analysis.compare import QuestionChange, rank_text
from sweep.analysis.gate import GateCheck, GateResult


def _rule(c: GateCheck) -> str:
    return f"{c.metric} >= baseline - {c.max_drop:g}"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: no pipe or line break ends the cell early."""
    return " ".join(text.split()).replace("|", "\\|")


def gate_markdown(result: GateResult, limit: int = 10) -> str:
    """The decision, the gated metrics, every shared metric, and the questions that regressed most.

    Args:
        result: what :func:`sweep.serving.gate.gate` returned.
        limit: regressed questions listed.

    Returns:
        GitHub-flavoured Markdown (append it to ``$GITHUB_STEP_SUMMARY``).

    Example:
        >>> print(gate_markdown(gate("prod/", "configs/hybrid.yaml")))
    """
    c = result.comparison
    verdict = "PASS" if result.passed else "FAIL"
    lines = [
        f"## sweep gate: {verdict}",
        "",
        f"Candidate `{result.candidate_name}` against baseline `{result.baseline_name}` on "
        f"`{result.eval_set}`, {c.n_questions} questions.",
        "",
        "| gate | baseline | candidate | delta | one-sided lower bound | p | result |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for g in result.checks:
        lines.append(
            f"| {_rule(g)} | {g.baseline:.4f} | {g.candidate:.4f} | {g.delta:+.4f} | {g.lower_bound:+.4f} "
            f"| {g.p_value:.4f} | {'pass' if g.passed else 'FAIL'} |"
        )
    alpha = result.checks[0].alpha
    lines += [
        "",
        f"A gate passes when the data show the candidate's mean above baseline - margin: one-sided "
        f"randomisation test of the per-question differences, p < {alpha:g}; the lower bound is the "
        f"bootstrap's one-sided {1 - alpha:.0%} bound of the mean delta.",
    ]
    lines += [f"> **Warning:** {w}" for w in result.warnings]
    lines += [
        "",
        "<details><summary>Every metric both sides scored</summary>",
        "",
        "| metric | baseline | candidate | delta | 95% CI of delta | p (two-sided, Holm) |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for name, m in c.metrics.items():
        lines.append(
            f"| {name} | {m.a:.4f} | {m.b:.4f} | {m.delta:+.4f} | [{m.ci[0]:+.4f}, {m.ci[1]:+.4f}] "
            f"| {m.p_holm:.4f} |"
        )
    lines += [
        "",
        "</details>",
        "",
        f"### Questions that regressed most on {c.metric} ({len(c.regressed)} regressed, "
        f"{len(c.improved)} improved)",
        "",
    ]
    if c.regressed:
        lines += [
            "| question | baseline | candidate | first relevant rank | text |",
            "|---|---:|---:|---|---|",
        ]
        lines += [_question_row(q) for q in c.regressed[:limit]]
        if len(c.regressed) > limit:
            lines.append(f"\n… and {len(c.regressed) - limit} more (see --json).")
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def _question_row(q: QuestionChange) -> str:
    text = (q.text[:80] + "…") if len(q.text) > 80 else q.text
    return (
        f"| {_cell(q.question_id)} | {q.a:.3f} | {q.b:.3f} | {rank_text(q.rank_a)} → {rank_text(q.rank_b)} "
        f"| {_cell(text)} |"
    )


def gate_junit(result: GateResult) -> str:
    """One test case per gated metric, failed when the candidate did not pass it.

    Args:
        result: what :func:`sweep.serving.gate.gate` returned.

    Returns:
        JUnit XML text, as CI test reporters read it.

    Example:
        >>> Path("gate.xml").write_text(gate_junit(result))
    """
    failures = sum(not g.passed for g in result.checks)
    suites = ET.Element(
        "testsuites", name="sweep gate", tests=str(len(result.checks)), failures=str(failures)
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"{result.candidate_name} vs {result.baseline_name}",
        tests=str(len(result.checks)),
        failures=str(failures),
        errors="0",
    )
    for g in result.checks:
        case = ET.SubElement(suite, "testcase", classname="sweep.gate", name=_rule(g))
        detail = (
            f"baseline {g.baseline:.4f}, candidate {g.candidate:.4f}, delta {g.delta:+.4f}, "
            f"one-sided lower bound {g.lower_bound:+.4f}, p {g.p_value:.4f} (alpha {g.alpha:g})"
        )
        if g.passed:
            ET.SubElement(case, "system-out").text = detail
        else:
            ET.SubElement(
                case, "failure", message=f"{_rule(g)} not shown", type="NonInferiority"
            ).text = detail
    ET.SubElement(suite, "system-out").text = gate_markdown(result)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def gate_text(result: GateResult) -> str:
    """A few lines for the terminal: the verdict and each gated metric.

    Example:
        >>> print(gate_text(result))
        PASS  candidate configs/hybrid.yaml against baseline prod/ on data, 40 questions
    """
    c = result.comparison
    lines = [
        f"{'PASS' if result.passed else 'FAIL'}  candidate {result.candidate_name} against baseline "
        f"{result.baseline_name} on {result.eval_set}, {c.n_questions} questions"
    ]
    for g in result.checks:
        lines.append(
            f"  {'pass' if g.passed else 'FAIL'}  {_rule(g)}: {g.baseline:.4f} -> {g.candidate:.4f} "
            f"({g.delta:+.4f}, lower bound {g.lower_bound:+.4f}, p {g.p_value:.4f})"
        )
    lines += [f"  warning: {w}" for w in result.warnings]
    if c.regressed:
        worst = c.regressed[0]
        lines.append(
            f"  {len(c.regressed)} question(s) regressed on {c.metric}; most: {worst.question_id} "
            f"{worst.a:.3f} -> {worst.b:.3f}"
        )
    return "\n".join(lines)


__all__ = ["gate_junit", "gate_markdown", "gate_text"]
