"""``python -m sweep label``: its options, and the command (pool, then serve the judging page)."""

from __future__ import annotations

from pathlib import Path


def label_parser(sub) -> None:
    p = sub.add_parser("label", help="pool the questions' top results and judge them in the browser")
    p.add_argument("config", type=Path, help="a config whose dataset has the documents and any questions")
    p.add_argument("--depth", type=int, default=10, help="each pooled retriever's top N (default 10)")
    p.add_argument("--pool-modes", default="bm25,dense,hybrid", help="retrieval modes pooled (default all)")
    p.add_argument("--pool-config", type=Path, nargs="*", default=[], help="pool these configs instead")
    p.add_argument("--out", type=Path, help="session folder (default labels/<config name>)")
    p.add_argument("--port", type=int, default=8765, help="local port (0: any free one)")
    p.add_argument("--from-study", help="add the top results of this study's 3 best trials and the baseline")
    p.add_argument("--storage", help="that study's Optuna storage URL (default: the embedded one)")
    p.add_argument("--llm-url", help="an OpenAI-compatible API base (e.g. http://127.0.0.1:8000/v1): drafts")
    p.add_argument("--llm-model", default="gpt-4o-mini", help="the model the endpoint serves")
    p.add_argument("--llm-key-env", default="OPENAI_API_KEY", help="environment variable with the API key")
    p.add_argument(
        "--scale",
        type=_scale,
        default=None,
        help='grades and their names (default "0=not relevant,1=useful,2=answers it")',
    )
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument(
        "--judge", default="you", help="your name: each judge of one session judges blind to the others"
    )
    p.add_argument(
        "--draft-grades", action="store_true", help="the LLM grades every pooled passage first (agreement)"
    )
    p.add_argument(
        "--stats", action="store_true", help="print the session's summary and agreement, then exit"
    )


def _scale(text: str) -> dict[int, str]:
    import argparse

    try:
        scale = {int(g): name.strip() for g, name in (part.split("=", 1) for part in text.split(","))}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'--scale wants "0=not relevant,1=useful,...", got {text!r}'
        ) from None
    if 0 not in scale or any(g < 0 for g in scale):
        raise argparse.ArgumentTypeError("--scale needs grade 0 (not relevant) and no negative grade")
    return dict(sorted(scale.items()))


def cmd_label(args) -> int:
    from sweep.labeling.drafts import DraftClient
    from sweep.labeling.server import serve
    from sweep.labeling.session import open_session, session_summary

    if args.stats:
        print(session_summary(_existing_store(args)))
        return 0

    modes = tuple(m.strip() for m in args.pool_modes.split(",") if m.strip())
    drafter = DraftClient(args.llm_url, args.llm_model, args.llm_key_env) if args.llm_url else None
    session = open_session(
        args.config,
        args.out,
        args.depth,
        modes,
        args.pool_config,
        args.from_study,
        args.storage,
        drafter=drafter,
        scale=args.scale,
        judge=args.judge,
        draft_grades=args.draft_grades,
    )

    def ready(url: str) -> None:
        print(f"judging page: {url}  (Ctrl-C stops; every judgment is saved as you make it)", flush=True)
        print(f"eval set: {session.store.out_path}  (point dataset.questions at it)", flush=True)
        if args.open:
            import webbrowser

            webbrowser.open(url)

    serve(session, args.port, ready)
    print(session_summary(session.store))
    return 0


def _existing_store(args):
    """The session folder's store, for --stats: nothing is pooled, nothing served."""
    from sweep.config.load import load_config
    from sweep.data.select import load_dataset
    from sweep.errors import SweepError
    from sweep.labeling.server import SCALE
    from sweep.labeling.session import session_folder
    from sweep.labeling.store import JudgmentStore

    base = load_config(args.config)
    folder = session_folder(base, args.out)
    if not (folder / "log.jsonl").exists():
        raise SweepError(f"{folder}: no labelling session here (no log.jsonl); pass --out SESSION_FOLDER")
    eval_set = load_dataset(base.dataset, scorable=False)
    return JudgmentStore(folder, eval_set.documents, eval_set.questions, tuple(args.scale or SCALE))


__all__ = ["cmd_label", "label_parser"]
