"""Metrics: trec_eval-exact ranking measures and Chroma's character-level span measures."""

from sweep.metrics.evaluate import Metric, Scores, evaluate, parse_metric, standard_metrics
from sweep.metrics.gains import RankedGains, ranked_gains
from sweep.metrics.spans import span_metrics
from sweep.metrics.trec import score

__all__ = [
    "Metric",
    "RankedGains",
    "Scores",
    "evaluate",
    "parse_metric",
    "ranked_gains",
    "score",
    "span_metrics",
    "standard_metrics",
]
