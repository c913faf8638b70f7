"""``python -m sweep gate BASELINE CANDIDATE``: its options, and the command (exit 0 pass, 1 fail, 2 bad input)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a number such as 0.01, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def gate_parser(sub) -> None:
    p = sub.add_parser(
        "gate",
        help="pass (exit 0) when the candidate is not worse than the baseline, fail (exit 1) when not shown",
    )
    p.add_argument("baseline", help="export folder (sweep export), config file or TREC run file")
    p.add_argument("candidate", help="export folder, config file or TREC run file")
    p.add_argument(
        "--eval-set",
        help="config or export folder whose dataset both sides are scored on (default: the candidate's), "
        "or a TREC qrels file for run files",
    )
    p.add_argument(
        "--metric", action="append", help="gated metric, repeatable; each must pass (default ndcg@10)"
    )
    p.add_argument(
        "--max-drop",
        type=_margin,
        default=0.01,
        help="non-inferiority margin: the drop allowed (default 0.01)",
    )
    p.add_argument("--alpha", type=_margin, default=0.05, help="one-sided level of the test (default 0.05)")
    p.add_argument("--summary", type=Path, help="write the Markdown summary here (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--junit", type=Path, help="write JUnit XML here")
    p.add_argument("--json", type=Path, help="write the decision and the comparison here")
    p.add_argument("--lenient", action="store_true", help="drop invalid eval-set items instead of failing")


def cmd_gate(args) -> int:
    import json

    from sweep.outputs.gate_summary import gate_junit, gate_markdown, gate_text
    from sweep.serving.gate import gate

    result = gate(
        args.baseline,
        args.candidate,
        eval_set=args.eval_set,
        metrics=args.metric or ["ndcg@10"],
        max_drop=args.max_drop,
        alpha=args.alpha,
        lenient=args.lenient,
    )
    print(gate_text(result))
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as fh:  # appends: CI summary files collect steps
            fh.write(gate_markdown(result))
        print(f"wrote {args.summary}")
    if args.junit:
        args.junit.write_text(gate_junit(result), encoding="utf-8")
        print(f"wrote {args.junit}")
    if args.json:
        args.json.write_text(json.dumps(result.to_json(), indent=1), encoding="utf-8")
        print(f"wrote {args.json}")
    return 0 if result.passed else 1


__all__ = ["cmd_gate", "gate_parser"]
