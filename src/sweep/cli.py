"""The command line: parse, call one library function, print.

python -m sweep CONFIG [key=value ...] [--trials N] [--timeout S] [--storage URL]
                [--study NAME] [--tracking-uri URI]   the sweep (Optuna + MLflow)
python -m sweep eval CONFIG [key=value ...] [--json OUT] [--run OUT]
python -m sweep score --qrels FILE --run FILE [--k 1,3,5,10] [--json OUT]
python -m sweep compare A B [--json OUT]     A, B: result files or MLflow run ids
python -m sweep report STUDY [--out FILE]    the study's HTML report
python -m sweep export STUDY --out DIR       best_config.yaml and scripts that load it
python -m sweep label CONFIG [--depth 10] [--port 8765]   pool the questions, judge them in the browser
python -m sweep gate BASELINE CANDIDATE [--max-drop 0.01]  exit 0 when the candidate is not worse, 1 when not
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sweep.cli_gate import cmd_gate, gate_parser
from sweep.cli_label import cmd_label, label_parser
from sweep.errors import SweepError
from sweep.logs import show_on_stdout
from sweep.outputs.render import describe_result, metrics_table

SUBCOMMANDS = ("eval", "score", "sweep", "compare", "report", "export", "label", "gate")
MAX_WORKERS = 256


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(k) for k in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--k wants comma-separated integers, got {text!r}") from None
    if any(k < 1 for k in ks):
        raise argparse.ArgumentTypeError("cutoffs must be >= 1")
    return ks


def _score_parser(sub) -> None:
    p = sub.add_parser("score", help="score TREC qrels and run files with trec_eval's semantics")
    p.add_argument("--qrels", required=True, help="qrels file: qid iter docid grade")
    p.add_argument("--run", required=True, help="run file: qid Q0 docid rank score tag")
    p.add_argument("--k", type=_ks, default=(1, 3, 5, 10), help="cutoffs, comma-separated (default 1,3,5,10)")
    p.add_argument("--relevance-threshold", type=int, default=1, help="grade counted relevant (default 1)")
    p.add_argument("--json", type=Path, help="write mean, per-question values and skipped questions here")


def _config_arguments(p, overrides_help: str) -> None:
    """What eval and sweep share: the config file, key=value overrides and --lenient."""
    p.add_argument("config", type=Path)
    p.add_argument("overrides", nargs="*", help=overrides_help)
    p.add_argument("--lenient", action="store_true", help="drop invalid eval-set items instead of failing")


def _eval_parser(sub) -> None:
    p = sub.add_parser("eval", help="evaluate one retrieval configuration, no search")
    _config_arguments(p, "key=value overrides, e.g. retrieval.top_k=20")
    p.add_argument("--json", type=Path, help="write mean, per-question values and skipped questions here")
    p.add_argument(
        "--run",
        type=Path,
        help="write the ranking here as a TREC run file (document ids for document "
        "labels, doc#start-end chunk ids for span labels)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep", description="Measure and tune RAG retrieval.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    _score_parser(sub)
    _eval_parser(sub)
    _sweep_parser(sub)
    _compare_parser(sub)
    _report_parser(sub)
    _export_parser(sub)
    label_parser(sub)
    gate_parser(sub)
    return parser


def _compare_parser(sub) -> None:
    p = sub.add_parser(
        "compare", help="B against A per question: deltas, intervals, p-values, flipped questions"
    )
    p.add_argument("a", help="result file (eval --json / score --json) or MLflow run id")
    p.add_argument("b", help="result file or MLflow run id")
    p.add_argument(
        "--metric", help="metric deciding improved/regressed (default ndcg@10, else the first ndcg)"
    )
    p.add_argument("--json", type=Path, help="write the comparison here")
    p.add_argument("--tracking-uri", default="sqlite:///runs/mlflow.db", help="where run ids are looked up")
    p.add_argument("--limit", type=int, default=10, help="questions listed per side (default 10)")


def _report_parser(sub) -> None:
    p = sub.add_parser("report", help="write a study's self-contained HTML report")
    p.add_argument("study", help="study name (the config file's name unless --study was given)")
    p.add_argument("--storage", help="Optuna storage URL (default sqlite:///runs/<study>/optuna.db)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI, to attach the report to the parent run")
    p.add_argument("--out", type=Path, help="output file (default runs/<study>/report.html)")


def _export_parser(sub) -> None:
    p = sub.add_parser("export", help="write a finished study's best configuration and scripts that load it")
    p.add_argument("study", help="study name (the config file's name unless --study was given)")
    p.add_argument(
        "--out", type=Path, required=True, help="folder to write best_config.yaml and the scripts into"
    )
    p.add_argument("--storage", help="Optuna storage URL (default sqlite:///runs/<study>/optuna.db)")
    p.add_argument("--runs-dir", default="runs", help="where the embedded stores live (default runs/)")
    p.add_argument(
        "--question", default="What does this corpus say about it?", help="the scripts' example question"
    )


def _sweep_parser(sub) -> None:
    p = sub.add_parser("sweep", help="search the configuration space (the default command)")
    _config_arguments(p, "key=value overrides of the baseline configuration")
    p.add_argument(
        "--trials", type=int, help="the study's size: finished trials to reach (default: search.trials)"
    )
    p.add_argument(
        "--workers", type=int, default=1, help="worker processes sharing the study and caches (default 1)"
    )
    p.add_argument("--runs-dir", default="runs", help="where the embedded stores live (default runs/)")
    p.add_argument("--worker-only", action="store_true", help=argparse.SUPPRESS)  # set for spawned workers
    p.add_argument("--timeout", type=float, help="stop starting trials after S seconds")
    p.add_argument("--storage", help="Optuna storage URL (default sqlite:///runs/<study>/optuna.db)")
    p.add_argument("--study", help="study name (default: the config file's name)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///runs/mlflow.db)")
    p.add_argument(
        "--warm-start", metavar="STUDY", help="queue that earlier study's best configurations first"
    )
    p.add_argument(
        "--warm-start-storage", metavar="URL", help="its storage (default sqlite:///runs/STUDY/optuna.db)"
    )
    p.add_argument("--warm-start-top", type=int, default=5, metavar="K", help="how many of them (default 5)")


def cmd_score(args) -> int:
    from sweep.metrics import score, standard_metrics

    metrics = standard_metrics(args.k)
    scores = score(args.qrels, args.run, metrics, threshold=args.relevance_threshold)
    print(f"{len(scores.question_ids)} questions scored", end="")
    print(f", {len(scores.skipped)} skipped (no relevant qrels, or not in qrels)" if scores.skipped else "")
    print(metrics_table(scores.mean()))
    if args.json:
        scores.write_json(args.json)
        print(f"wrote {args.json}")
    return 0


def cmd_eval(args) -> int:
    from sweep.pipeline.evaluate import evaluate_config

    result = evaluate_config(args.config, args.overrides, lenient=args.lenient)
    print(describe_result(result))
    if args.json:
        result.scores.write_json(args.json)
        print(f"wrote {args.json}")
    if args.run:
        from sweep.metrics.runfiles import write_run

        write_run(args.run, result.ranking())
        print(f"wrote {args.run} (TREC run: {'chunk' if result.has_spans else 'document'} ids)")
    return 0


def cmd_sweep(args) -> int:
    from sweep.tuning.sweep import run_sweep

    if not 1 <= args.workers <= MAX_WORKERS:
        raise SweepError(f"--workers must be between 1 and {MAX_WORKERS} (got {args.workers})")
    if args.trials is not None and not 0 <= args.trials <= 1_000_000:
        raise SweepError(f"--trials must be between 0 and 1,000,000 (got {args.trials})")
    if args.timeout is not None and not (0 < args.timeout < float("inf")):
        raise SweepError(f"--timeout must be a positive number of seconds (got {args.timeout})")
    run_sweep(
        args.config,
        args.overrides,
        trials=args.trials,
        timeout=args.timeout,
        storage=args.storage,
        study=args.study,
        tracking_uri=args.tracking_uri,
        workers=args.workers,
        worker_only=args.worker_only,
        lenient=args.lenient,
        runs_dir=args.runs_dir,
        warm_start=args.warm_start,
        warm_start_storage=args.warm_start_storage,
        warm_start_top=args.warm_start_top,
    )
    return 0


def cmd_compare(args) -> int:
    import json

    from sweep.analysis.compare import compare_scores, load_side, render_comparison

    a, a_name = load_side(args.a, args.tracking_uri)
    b, b_name = load_side(args.b, args.tracking_uri)
    comparison = compare_scores(a, b, a_name=a_name, b_name=b_name, metric=args.metric)
    print(render_comparison(comparison, limit=args.limit))
    if args.json:
        args.json.write_text(json.dumps(comparison.to_json(), indent=1))
        print(f"wrote {args.json}")
    return 0


def cmd_report(args) -> int:
    from sweep.tuning.report import report_study

    path = report_study(args.study, storage=args.storage, tracking_uri=args.tracking_uri, out=args.out)
    print(f"wrote {path}  (open it in a browser)")
    return 0


def cmd_export(args) -> int:
    from sweep.serving.export import export_study

    done = export_study(
        args.study, args.out, storage=args.storage, runs_dir=args.runs_dir, question=args.question
    )
    print(f"wrote {done.config} (trial {done.trial}) and " + ", ".join(p.name for p in done.scripts))
    print(f"use it: sweep.Retriever.from_config({str(done.config)!r}), or run  python {done.scripts[0]}")
    return 0


def _quiet_library_warnings() -> None:
    """Library warnings that tell a user of this tool nothing (deprecations inside MLflow and SQLAlchemy,
    Optuna's notes on its own experimental parts and its importance estimate) are not printed."""
    import warnings

    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("ignore", message=".*quantiles select the same set of trials.*")
    warnings.filterwarnings("ignore", message=".*is experimental.*")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _quiet_library_warnings()
    show_on_stdout()
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    if not argv:  # the default command is the sweep: show how to call it
        sub = parser._subparsers._group_actions[0].choices["sweep"]
        print(
            sub.format_usage().replace("python -m sweep sweep", "python -m sweep").rstrip(), file=sys.stderr
        )
        print(
            "  e.g. python -m sweep configs/hybrid.yaml    (other commands: eval, score, compare, report, export, label, gate; "
            "--help for all)",
            file=sys.stderr,
        )
        return 2
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):
        argv = ["sweep", *argv]  # `python -m sweep CONFIG` is the sweep
    args, extra = parser.parse_known_args(argv)
    stray = [x for x in extra if x.startswith("-") or "=" not in x]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:  # key=value overrides may follow options: `sweep CONFIG --trials 5 retrieval.top_k=10`
        if not hasattr(args, "overrides"):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = list(args.overrides) + extra
    try:
        commands = {
            "score": cmd_score,
            "eval": cmd_eval,
            "sweep": cmd_sweep,
            "compare": cmd_compare,
            "report": cmd_report,
            "export": cmd_export,
            "label": cmd_label,
            "gate": cmd_gate,
        }
        return commands[args.command](args)
    except SweepError as e:
        if debug:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `sweep score ... | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a file we were asked to write (--json, --out) cannot be written
        if debug or e.filename is None:
            raise
        print(f"error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
