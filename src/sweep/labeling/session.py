"""``sweep label CONFIG``: pool the config's questions, then judge them in the browser, resumably.

The session folder (default ``labels/<config name>/``) holds ``pool.json`` (built once: reopening
shows the same pools), ``log.jsonl`` and ``questions.jsonl`` (see :mod:`sweep.labeling.store`).
Point ``dataset.questions`` at that ``questions.jsonl`` to sweep over the judged set.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from sweep.config.load import load_config
from sweep.config.schema import EvalConfig
from sweep.data.select import load_dataset
from sweep.errors import SweepError
from sweep.labeling.drafts import DraftClient
from sweep.labeling.pool import DEFAULT_MODES, Passage, build_pools, extend_pool, pool_configs
from sweep.labeling.server import SCALE, LabelSession
from sweep.labeling.store import DEFAULT_JUDGE, DRAFT_JUDGE, JudgmentStore
from sweep.llm import LLMError
from sweep.logs import logger, progress_bar
from sweep.pipeline.runner import Pipeline
from sweep.serving.retriever import Retriever
from sweep.textfile import write_whole


def open_session(
    config: str | Path | EvalConfig,
    out: str | Path | None = None,
    depth: int = 10,
    modes: Sequence[str] = DEFAULT_MODES,
    pool_from: Sequence[str | Path] = (),
    from_study: str | None = None,
    storage: str | None = None,
    runs_dir: str | Path = "runs",
    drafter: DraftClient | None = None,
    scale: dict[int, str] | None = None,
    judge: str = DEFAULT_JUDGE,
    draft_grades: bool = False,
) -> LabelSession:
    """Load the corpus and questions, build (or reopen) the pools and the judgment store.

    Args:
        config: the labelling configuration (dataset with any questions, chunking, models).
        out: the session folder; default ``labels/<config file stem>``.
        depth: each pooled retriever's top ``depth`` enters the pool.
        modes: retrieval modes pooled at the config's chunking (ignored when ``pool_from`` is given).
        pool_from: configuration files whose retrievers build the pool instead.
        from_study: a finished sweep: the top ``depth`` of its three best trials and of the
            baseline (this config) are added to every question's pool, so the next judgments go
            where they can change the sweep's decision.
        storage: that study's Optuna storage (default: the embedded one under ``runs_dir``).
        runs_dir: where the embedded stores live.
        drafter: an LLM endpoint that drafts questions for sampled chunks (optional).
        scale: grade -> name (default 0 not relevant, 1 useful, 2 answers it).
        judge: who judges (recorded on each judgment; each judge sees only their own).
        draft_grades: the drafter grades every pooled passage first (kept for agreement, not the eval set).

    Returns:
        A :class:`LabelSession` for :func:`sweep.labeling.server.serve`.

    Example:
        >>> session = open_session("configs/docs.yaml", depth=10)  # doctest: +SKIP
    """
    base = config if isinstance(config, EvalConfig) else load_config(config)
    folder = session_folder(base, out)
    eval_set = load_dataset(base.dataset, scorable=False)
    pipeline = Pipeline(base.cache_dir, progress=True, serving=True)  # embedding a corpus takes a while
    configs = {Path(p).stem: load_config(p) for p in pool_from} if pool_from else pool_configs(base, modes)
    retrievers: dict[str, Retriever] = {}

    def retriever_set() -> dict[str, Retriever]:
        if not retrievers:
            for name, c in configs.items():
                logger.info("pooling: building the %s retriever", name)
                retrievers[name] = Retriever(c, pipeline)
        return retrievers

    scale = scale or SCALE
    store = JudgmentStore(folder, eval_set.documents, eval_set.questions, tuple(scale), judge)
    pool_path = folder / "pool.json"
    pools = _read_pools(pool_path)
    missing = [q for q in eval_set.questions if q.id not in pools]
    if missing:
        logger.info("pooling %d question(s): top %d of %s", len(missing), depth, ", ".join(configs))
        pools |= build_pools(missing, retriever_set(), depth)
        _write_pools(pool_path, pools)

    if from_study:
        study = _study_configs(from_study, storage, Path(runs_dir), folder) | {"baseline": base}
        logger.info("pooling the top %d of study %r's %s", depth, from_study, ", ".join(study))
        extra = build_pools(eval_set.questions, {n: Retriever(c, pipeline) for n, c in study.items()}, depth)
        for qid, passages in extra.items():
            pools[qid] = extend_pool(qid, pools.get(qid, []), passages)
        _write_pools(pool_path, pools)

    if draft_grades:
        if drafter is None:
            raise SweepError("--draft-grades needs an LLM endpoint: pass --llm-url")
        _draft_grades(store, pools, drafter, scale)

    def pool_one(qid: str, text: str) -> list[Passage]:
        from sweep.data.model import Question

        pools.update(build_pools([Question(qid, text, ())], retriever_set(), depth))
        _write_pools(pool_path, pools)
        return pools[qid]

    rng = random.Random(0)

    def sample(count: int) -> list[tuple[str, int, int]]:
        chunks, docs = pipeline.prepare(base).served[0], eval_set.documents
        picks = rng.sample(range(len(chunks)), min(count, len(chunks)))
        return [(docs[int(chunks.doc[i])].id, int(chunks.start[i]), int(chunks.end[i])) for i in picks]

    return LabelSession(store, pools, pool_one, scale, drafter=drafter, sample=sample)


def session_folder(config: EvalConfig, out: str | Path | None = None) -> Path:
    """Where a session lives: ``out``, else ``labels/<config file stem>``.

    Example:
        >>> session_folder(load_config("configs/docs.yaml"))  # doctest: +SKIP
        PosixPath('labels/docs')
    """
    return Path(out) if out else Path("labels") / (Path(config.source).stem if config.source else "session")


def _draft_grades(store: JudgmentStore, pools, drafter: DraftClient, scale: dict[int, str]) -> None:
    """The LLM grades each pooled passage not graded yet; a failed reply is said once and skipped."""
    todo = [
        (qid, p)
        for qid in store.state.questions
        for p in pools.get(qid, [])
        if (qid, p.doc_id, p.start, p.end) not in store.state.draft_grades
    ]
    failed = 0
    with progress_bar(total=len(todo), desc="drafting grades", unit="passage") as bar:
        for qid, p in todo:
            text = store.documents[p.doc_id].text[p.start : p.end]
            try:
                store.draft_grade(
                    qid, p.doc_id, p.start, p.end, drafter.grade(store.state.questions[qid], text, scale)
                )
            except LLMError as e:
                failed += 1
                if failed == 1:
                    logger.info("drafting grades: %s (later failures are counted)", e)
            bar.update(1)
    if failed:
        logger.info(
            "drafting grades: %d of %d passage(s) not graded; reopening the session retries them",
            failed,
            len(todo),
        )


def session_summary(store: JudgmentStore) -> str:
    """Questions, judgments per grade and judge, and the agreement between judges (and LLM drafts).

    Args:
        store: an open session's store.

    Returns:
        A few lines of text (what ``sweep label --stats`` prints).

    Example:
        >>> print(session_summary(session.store))  # doctest: +SKIP
    """
    from collections import Counter

    from sweep.labeling.agreement import session_agreement

    judgments = list(store.state.judgments.values())
    judged = {j.question for j in judgments}
    lines = [
        f"{len(store.state.questions)} question(s), {len(judged)} with a judgment; {len(judgments)} judgment(s)"
    ]
    for judge, count in sorted(Counter(j.judge for j in judgments).items()):
        grades = Counter(j.grade for j in judgments if j.judge == judge)
        lines.append(
            f"  {judge}: {count} (" + ", ".join(f"grade {g}: {grades[g]}" for g in sorted(grades)) + ")"
        )
    if store.state.draft_grades:
        lines.append(
            f"  {DRAFT_JUDGE}: {len(store.state.draft_grades)} drafted grade(s), not in the eval set"
        )
    seen = {j.grade for j in judgments} | set(store.state.draft_grades.values())
    for agreement in session_agreement(store.state, tuple(sorted(set(store.grades) | seen))):
        lines.append(agreement.describe())
    return "\n".join(lines)


def _study_configs(study_name: str, storage: str | None, runs_dir: Path, folder: Path, n: int = 3):
    """The configurations of a finished sweep's ``n`` best trials (by its first objective), rebuilt
    from the sweep file it recorded; the recorded best configuration if that file is gone."""
    import optuna

    from sweep.tuning.finish import BEST_CONFIG_ATTR
    from sweep.tuning.storage import load_existing_study
    from sweep.tuning.sweep_config import load_sweep_config
    from sweep.tuning.trials import ranked

    study = load_existing_study(study_name, storage, runs_dir)
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        raise SweepError(f"study {study_name!r} has no finished trial yet: run its sweep first")
    path = study.user_attrs.get("config")
    if path and Path(path).exists():
        sweep_config = load_sweep_config(path)
        maximize = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
        best = ranked(complete, maximize)[:n]
        return {f"trial {t.number}": sweep_config.for_trial(t.params) for t in best}
    recorded = study.user_attrs.get(BEST_CONFIG_ATTR)
    if not recorded:
        raise SweepError(f"study {study_name!r} has not finished and its sweep file {path} is gone")
    copy = folder / f"{study_name}-best.yaml"
    copy.write_text(recorded["yaml"], encoding="utf-8")
    return {f"trial {recorded['trial']}": load_config(copy)}


def _read_pools(path: Path) -> dict[str, list[Passage]]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        qid: [Passage(p["doc_id"], p["start"], p["end"], tuple(p["sources"])) for p in passages]
        for qid, passages in data.items()
    }


def _write_pools(path: Path, pools: dict[str, list[Passage]]) -> None:
    data = {
        qid: [
            {"doc_id": p.doc_id, "start": p.start, "end": p.end, "sources": list(p.sources)} for p in passages
        ]
        for qid, passages in pools.items()
    }
    write_whole(path, json.dumps(data, ensure_ascii=False))


__all__ = ["open_session", "session_folder", "session_summary"]
