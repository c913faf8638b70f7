"""``sweep export STUDY --out DIR``: the winner leaves the tool as a config file and code that loads it.

DIR gets ``best_config.yaml`` (the best trial's whole configuration, which
:meth:`sweep.Retriever.from_config` reads) and one short script per way of using it: plain Python,
LangChain and LlamaIndex. Each script runs as written from any directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.errors import SweepError
from sweep.tuning.finish import BEST_CONFIG_ATTR
from sweep.tuning.storage import load_existing_study

SNIPPETS = {
    "retriever.py": '''"""The tuned retriever of study {study!r} (trial {trial}), in plain Python."""
from pathlib import Path

import sweep

retriever = sweep.Retriever.from_config(Path(__file__).with_name("best_config.yaml"))
for hit in retriever.search({question!r}):
    print(f"{{hit.score:.4f}}  {{hit.chunk_id}}  {{hit.text[:70]!r}}")
''',
    "langchain_retriever.py": '''"""The tuned retriever of study {study!r} (trial {trial}) as a LangChain retriever.

Needs: pip install 'rag-sweep[langchain]'
"""
from pathlib import Path

from sweep.integrations.langchain import SweepRetriever

retriever = SweepRetriever.from_config(Path(__file__).with_name("best_config.yaml"))
for doc in retriever.invoke({question!r}):  # a Runnable: use it in any chain
    print(f"{{doc.metadata['score']:.4f}}  {{doc.metadata['doc_id']}}  {{doc.page_content[:70]!r}}")
''',
    "llamaindex_retriever.py": '''"""The tuned retriever of study {study!r} (trial {trial}) as a LlamaIndex retriever.

Needs: pip install 'rag-sweep[llamaindex]'
"""
from pathlib import Path

from sweep.integrations.llamaindex import SweepRetriever

retriever = SweepRetriever.from_config(Path(__file__).with_name("best_config.yaml"))
for node in retriever.retrieve({question!r}):  # or RetrieverQueryEngine.from_args(retriever, llm=...)
    print(f"{{node.score:.4f}}  {{node.node.ref_doc_id}}  {{node.node.get_content()[:70]!r}}")
''',
}


@dataclass(frozen=True)
class Export:
    """What ``export_study`` wrote: the folder, the config file, the scripts, and which trial it is."""

    out: Path
    config: Path
    scripts: list[Path]
    trial: int


def export_study(
    study_name: str,
    out: str | Path,
    *,
    storage: str | None = None,
    runs_dir: str | Path = "runs",
    question: str = "What does this corpus say about it?",
) -> Export:
    """Write the best configuration of a finished sweep and scripts that load it in each framework.

    Args:
        study_name: the study (the config file's name unless ``--study`` was given).
        out: the folder to write; created if missing, files in it replaced.
        storage: the study's Optuna storage URL (default: the embedded ``runs/<study>/optuna.db``).
        runs_dir: where the embedded stores live.
        question: the example question the scripts ask.

    Returns:
        :class:`Export`, naming the files written.

    Example:
        >>> export_study("hybrid", "tuned").config
        PosixPath('tuned/best_config.yaml')
    """
    study = load_existing_study(study_name, storage, Path(runs_dir))
    best = study.user_attrs.get(BEST_CONFIG_ATTR)
    if not best:
        raise SweepError(
            f"study {study_name!r} has not finished yet (no best configuration recorded): run the "
            "sweep command again; it resumes and ends by recording it"
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = out / "best_config.yaml"
    config.write_text(
        f"# The best configuration of study {study_name!r} (trial {best['trial']}), written by "
        f"`python -m sweep export`.\n# Load it with sweep.Retriever.from_config(path).\n{best['yaml']}"
    )
    scripts = []
    for name, text in SNIPPETS.items():
        path = out / name
        path.write_text(text.format(study=study_name, trial=best["trial"], question=question))
        scripts.append(path)
    return Export(out, config, scripts, int(best["trial"]))


__all__ = ["Export", "export_study"]
