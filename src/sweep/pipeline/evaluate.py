"""One configuration scored end to end: what ``sweep eval`` and notebooks call."""

from __future__ import annotations

from pathlib import Path

from sweep.config.schema import EvalConfig
from sweep.pipeline.result import EvalResult
from sweep.pipeline.runner import Pipeline


def evaluate_config(
    config: EvalConfig | str | Path,
    overrides: list[str] = (),
    lenient: bool = False,
    extra_metrics: list[str] = (),
) -> EvalResult:
    """Evaluate one configuration on its eval set (``sweep eval``), reusing the on-disk caches.

    Args:
        config: a validated :class:`EvalConfig` or a YAML file (its ``search:`` section is ignored).
        overrides: ``key=value`` changes applied to a file, e.g. ``["retrieval.top_k=20"]``.
        lenient: drop invalid eval-set items (listed in ``result.dropped``) instead of failing.
        extra_metrics: scored too, even past ``retrieval.top_k`` (a gate's metric, a sweep's objective).

    Returns:
        :class:`EvalResult`: ``.scores`` (the configured view; ``.mean()``, per-question
        ``.values``), chunk and document views, the ranking (``.run``), timings and counters.

    Example:
        >>> result = evaluate_config("configs/hybrid.yaml", ["retrieval.mode=bm25"])
        >>> round(result.scores.mean()["ndcg@10"], 3)
    """
    if not isinstance(config, EvalConfig):
        from sweep.config.load import load_config

        config = load_config(config, list(overrides))
    return Pipeline(config.cache_dir, lenient=lenient).run(config, list(extra_metrics))


__all__ = ["evaluate_config"]
