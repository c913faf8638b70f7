"""``sweep eval`` on a SciFact slice, cold (empty cache) and warm."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchmarks.common import SHARED


def bench_eval_cold_warm() -> dict:
    """`sweep eval` twice on a 600-document SciFact slice: cold (empty cache), then warm (new process state)."""

    import yaml

    from sweep.config.load import load_config
    from sweep.data import load_beir
    from sweep.pipeline.runner import Pipeline

    full = load_beir(SHARED / "scifact", "test")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "d").mkdir()
        docs = full.documents[:600]
        ids = {d.id for d in docs}
        qs = [q for q in full.questions if all(e.doc_id in ids for e in q.evidence)]
        (tmp / "d" / "corpus.jsonl").write_text(
            "\n".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) for d in docs)
        )
        (tmp / "d" / "questions.jsonl").write_text(
            "\n".join(
                json.dumps(
                    {
                        "id": q.id,
                        "text": q.text,
                        "evidence": [{"doc_id": e.doc_id, "grade": 1} for e in q.evidence],
                    }
                )
                for q in qs
            )
        )
        cfg = {
            "dataset": {"loader": "native", "path": str(tmp / "d")},
            "retrieval": {"mode": "hybrid"},
            "cache_dir": str(tmp / "c"),
        }
        (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
        config = load_config(tmp / "c.yaml")
        t = time.perf_counter()
        Pipeline(config.cache_dir, progress=False).run(config)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        warm_result = Pipeline(config.cache_dir, progress=False).run(config)
        warm = time.perf_counter() - t
    print(
        f"sweep eval, 600 SciFact documents, hybrid: cold {cold:.1f} s, warm {warm:.2f} s "
        f"({cold / warm:.0f}x), texts encoded on the warm run: {warm_result.counters['texts_encoded']}"
    )
    return {"eval_cold_over_warm": cold / warm}
