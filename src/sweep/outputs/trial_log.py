"""What MLflow records of one trial, taken from its result in the process that ran the trial and
written by whichever process logs it (:mod:`sweep.outputs.writer`): plain data, cheap to send
between processes, with no corpus or model attached. The artifacts' text is made here, on the
trial's side: the writer's own work, MLflow's, is what bounds how many trials a minute a sweep logs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import yaml
from mlflow.entities import Metric, Param, RunTag

from sweep.analysis.diagnostics import describe, diagnose
from sweep.metrics import Scores
from sweep.metrics.runfiles import run_text
from sweep.outputs.run_view import applicable, flatten, mlflow_name
from sweep.pipeline.result import EvalResult


@dataclass
class TrialLog:
    """One trial's metrics, configuration and artifacts, ready to log.

    Args:
        number: the Optuna trial number.
        value: the objective's value.
        means: the mean of every metric of the configured view, and ``latency_ms``.
        config: the full configuration as a dict (a trial logged late from the study has it too).
        files: the artifacts' names and text (:func:`artifacts`); empty for a trial logged late.

    Example:
        >>> log = TrialLog.of(3, result, 0.61, {"ndcg@10": 0.61, "latency_ms": 2.0})  # doctest: +SKIP
        >>> [m.key for m in log.metrics(now=0)][:2]  # doctest: +SKIP
        ['ndcg_at_10', 'latency_ms']
    """

    number: int
    value: float
    means: dict[str, float]
    config: dict | None = None
    doc_means: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    encode_texts_per_s: float | None = None
    dense_truncated_share: float | None = None
    recall_curve: np.ndarray | None = None
    files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, number: int, result: EvalResult | None, value: float, means: dict[str, float]) -> TrialLog:
        """Take what MLflow needs from ``result``, the artifacts written out as text."""
        if result is None:
            return cls(number, float(value), dict(means))
        config = result.config.model_dump(mode="json", exclude={"source"})
        return cls(
            number,
            float(value),
            dict(means),
            config,
            result.doc_scores.mean(),
            dict(result.timings),
            dict(result.counters),
            result.encode_texts_per_s,
            result.dense_truncated_share,
            np.asarray(result.recall_curve),
            artifacts(number, config, result.scores, result.ranking(), result.recall_curve),
        )

    def metrics(self, now: int) -> list[Metric]:
        """The means, the objective, and for an evaluated trial: the document view's means, stage times,
        throughput, and the recall curve as one metric stepped by k (MLflow charts it as the curve)."""
        out = [Metric(mlflow_name(k), float(v), now, 0) for k, v in self.means.items()]
        out.append(Metric("objective", self.value, now, 0))
        if self.recall_curve is None:  # logged late, from the study: its means only
            return out
        out += [Metric(f"doc_{mlflow_name(k)}", float(v), now, 0) for k, v in self.doc_means.items()]
        out += [Metric(f"time_{k}_s", float(v), now, 0) for k, v in self.timings.items()]
        if self.encode_texts_per_s is not None:  # what a GPU (or a bigger batch) bought
            out.append(Metric("encode_texts_per_s", self.encode_texts_per_s, now, 0))
        if self.dense_truncated_share is not None:
            out.append(Metric("dense_truncated_share", self.dense_truncated_share, now, 0))
        out += [Metric("recall_curve", float(v), now, k) for k, v in enumerate(self.recall_curve, 1)]
        return out

    def params(self, logged: set[str]) -> list[Param]:
        """The configuration's applicable keys, but those in ``logged`` (on the run already)."""
        flat = applicable(flatten(self.config)) if self.config is not None else {}
        return [Param(k, str(v)[:6000]) for k, v in flat.items() if k not in logged]

    def tags(self) -> list[RunTag]:
        """Cache counters are tags: facts about the run, not results to chart."""
        return [RunTag(f"sweep.cache.{k}", str(v)) for k, v in self.counters.items()]


def artifacts(
    number: int,
    config: dict,
    scores: Scores,
    ranking: dict[str, list[tuple[str, float]]],
    recall_curve: np.ndarray,
) -> dict[str, str]:
    """A trial's files: config.yaml, scores.json (what ``sweep compare RUN_ID`` reads), run.trec and
    diagnosis.txt.

    Args:
        number: the trial number (the run file's tag).
        config: the configuration as a dict.
        scores: per-question values of the configured view.
        ranking: each question's ranked ids and scores (:meth:`EvalResult.ranking`).
        recall_curve: mean recall@k for k = 1.., for the diagnosis.

    Returns:
        File name -> text.
    """
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's, where PyYAML has it: 5x faster
    diagnosis = diagnose(recall_curve, scores.mean(), config["retrieval"]["top_k"])
    return {
        "config.yaml": yaml.dump(config, Dumper=dumper, sort_keys=False),
        "scores.json": json.dumps(scores.to_json()),  # one line: C's encoder (indent takes Python's)
        "run.trec": run_text(ranking, tag=f"trial-{number}"),  # trec_eval-ready
        "diagnosis.txt": describe(diagnosis) + "\n",
    }


__all__ = ["TrialLog", "artifacts"]
