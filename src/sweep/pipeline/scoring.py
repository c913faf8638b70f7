"""A ranking scored: the chunk view, the document view and the recall curve of one configuration's run."""

from __future__ import annotations

import numpy as np

from sweep.config.schema import EvalConfig
from sweep.metrics import Scores, evaluate, span_metrics, standard_metrics
from sweep.metrics.curve import recall_curve
from sweep.pipeline.prepare import Prepared
from sweep.pipeline.result import document_run
from sweep.retrieval import StageResult


def score_ranking(
    p: Prepared, config: EvalConfig, deep: StageResult, run: StageResult, extra_metrics=()
) -> tuple[Scores, Scores, np.ndarray]:
    """Metrics at the configured cutoffs (up to top_k) plus ``extra_metrics``, in both views.

    Args:
        p: the prepared data (small-to-big scores the parents it serves).
        config: cutoffs, span metrics and the view the recall curve follows.
        deep: the whole candidate ranking (for the recall curve).
        run: its top_k (what is served and scored).
        extra_metrics: a sweep's objective when it is not among the standard ones.

    Returns:
        (chunk-level scores, document-level scores, the recall curve).

    Example:
        >>> chunk_scores, doc_scores, curve = score_ranking(p, config, deep, deep.head(10))  # doctest: +SKIP
    """
    top_k = config.retrieval.top_k
    names = standard_metrics(tuple(k for k in config.evaluation.ks if k <= top_k) or (top_k,))
    names += [m for m in extra_metrics if m not in names]
    chunks, labels = p.served
    chunk_scores = evaluate(run.ids, labels, names)
    if p.has_spans:
        for n in config.evaluation.span_metrics_at:
            chunk_scores.values.update(span_metrics(run.ids, labels, chunks, n))
    n_docs = len(p.eval_set.documents)
    doc_scores = evaluate(document_run(run.ids, chunks.doc, n_docs), p.doc_labels, names)
    texts = dict(zip(labels.question_ids, p.queries))
    for s in (chunk_scores, doc_scores):
        s.texts = texts
    if config.evaluation.view == "document":
        curve = recall_curve(document_run(deep.ids, chunks.doc, n_docs), p.doc_labels)
    else:
        curve = recall_curve(deep.ids, labels)
    return chunk_scores, doc_scores, curve
