"""Query transformation before (and between) retrieval passes, all offline.

* ``rm3``: pseudo-relevance feedback for BM25 as in Anserini/Pyserini. The
  top ``fb_docs`` chunks of a first BM25 pass form a relevance model
  (each chunk's term distribution, weighted by its BM25 score, summed,
  cut to ``fb_terms`` terms and L1-normalised); it is mixed with the
  L1-normalised original query, ``original_weight`` of the latter, and the
  mix is run as a weighted BM25 query.
* ``dense_prf``: Rocchio for embeddings: ``(1 - w)·q + w·centroid(top
  fb_docs chunks)``, renormalised, searched again.
* ``multi_query``: each question's ``rewrites`` are retrieved beside it and
  the lists fused with RRF.
* ``plugin``: a ``module:function`` that maps a question's text to one or
  more queries (an LLM rewriter, say), fused the same way; its outputs are
  cached per question text on disk.
* ``hyde``: an LLM writes a passage that would answer the question, and the
  passage is embedded in place of it (Gao et al. 2022); BM25 keeps the question.
* ``llm_multi_query``: an LLM writes ``n`` other phrasings, retrieved beside
  the question and fused with RRF. Both go to ``retrieval.query.llm`` (any
  OpenAI-compatible endpoint) and are cached per question and prompt.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np

from sweep.cache import content_key
from sweep.plugins import load_plugin
from sweep.retrieval.results import StageResult
from sweep.textfile import write_whole

log = logging.getLogger(__name__)
ALLOWED_TERM = re.compile(r"^[a-z0-9]{2,}$")  # Anserini keeps terms of 2+ letters/digits, not only digits


# -- several queries per question ---------------------------------------------------


def stage_queries(
    questions: list[str], rewrites: list[list[str]], allowed, q, cache_dir: str, keep: bool = True
):
    """(queries, their question, filter mask) for the first stages: several per question for
    multi_query and llm_multi_query (the question and its rewrites) and plugin (the plugin's queries).

    Args:
        questions: the questions' texts.
        rewrites: each question's own rewrites (multi_query).
        allowed: the questions' :class:`~sweep.retrieval.filters.Filters`, or None.
        q: the ``retrieval.query`` section.
        cache_dir: where plug-in and LLM answers are kept.
        keep: write new answers there (serving reads the sweep's, but does not grow the cache).

    Returns:
        ``(queries, owner, allowed)``; ``owner`` is None when each question is its own one query.

    Example:
        >>> stage_queries(["q?"], [["other q?"]], None, QueryConfig(transform="multi_query"), "cache")[:2]  # doctest: +SKIP
        (['q?', 'other q?'], array([0, 0]))
    """
    if q.transform not in ("multi_query", "plugin", "llm_multi_query"):
        return questions, None, allowed
    if q.transform == "multi_query":
        lists = [[text, *more] for text, more in zip(questions, rewrites)]
    elif q.transform == "llm_multi_query":
        lists = [
            [text, *more]
            for text, more in zip(questions, llm_queries(q.llm, q.transform, questions, cache_dir, keep))
        ]
    else:
        lists = plugin_queries(q.plugin, questions, cache_dir, keep)
    flat, owner = expand(lists)
    return flat, owner, None if allowed is None else allowed[owner]


def plugin_queries(path: str, texts: list[str], cache_dir: str, keep: bool = True) -> list[list[str]]:
    """The plugin's queries per question, computed once per (plugin, text) and kept on disk."""
    loaded: list = []

    def make(text: str) -> list[str]:
        if not loaded:
            loaded.append(load_plugin(path))
        produced = loaded[0](text)
        queries = (
            [produced]
            if isinstance(produced, str)
            else list(produced)
            if isinstance(produced, (list, tuple))
            else []
        )
        if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
            from sweep.errors import SweepError

            raise SweepError(
                f"plugin {path!r} returned {produced!r} for {text[:60]!r}: expected a string or a list of strings"
            )
        return queries

    return _cached_queries(content_key("plugin", path), texts, cache_dir, make, keep)


HYDE_PROMPT = "Write a short passage that answers the question. Reply with the passage only."
MULTI_PROMPT = (
    "Write {n} different ways to ask the same question, for a search engine. "
    "Reply with one per line, nothing else."
)


def llm_queries(llm, transform: str, texts: list[str], cache_dir: str, keep: bool = True) -> list[list[str]]:
    """What the LLM makes of each question (hyde: [a passage]; llm_multi_query: rewrites), cached on
    disk per (endpoint, model, prompt, transform, question): a sweep asks once per question."""
    from sweep.llm import LLMError, chat

    prompt = llm.prompt or (HYDE_PROMPT if transform == "hyde" else MULTI_PROMPT.format(n=llm.n))

    def ask(text: str) -> list[str]:
        reply = chat(llm.url, llm.model, prompt, text, llm.key_env, llm.timeout).strip()
        if transform == "hyde":
            out = [reply]
        else:
            lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip() for line in reply.splitlines()]
            out = [line for line in lines if line][: llm.n]
        if not out or not all(out):
            raise LLMError(f"{llm.url}: an empty {transform} reply for {text[:60]!r}")
        return out

    return _cached_queries(
        content_key("llm", llm.url, llm.model, prompt, transform), texts, cache_dir, ask, keep
    )


def _cached_queries(name: str, texts: list[str], cache_dir: str, make, keep: bool = True) -> list[list[str]]:
    """Each text's answer from the cache, or made (and written there when ``keep``)."""
    store = Path(cache_dir) / "queries" / name
    if keep:
        store.mkdir(parents=True, exist_ok=True)
    out = []
    for text in texts:
        entry = store / f"{content_key(text)}.json"
        cached = _read_entry(entry)
        if cached is None:
            cached = make(text)
            if keep:
                write_whole(entry, json.dumps(cached))
        out.append(cached)
    return out


def _read_entry(entry: Path) -> list[str] | None:
    """A cached plug-in answer; a corrupt one (truncated, edited, not UTF-8) is removed and recomputed."""
    try:
        queries = json.loads(entry.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        queries = e
    if isinstance(queries, list) and queries and all(isinstance(q, str) and q.strip() for q in queries):
        return queries
    log.warning("query cache entry %s is corrupt; removing it, it will be recomputed", entry)
    entry.unlink(missing_ok=True)
    return None


def expand(per_question: list[list[str]]) -> tuple[list[str], np.ndarray]:
    """Flat queries and the question each belongs to."""
    flat = [q for qs in per_question for q in qs]
    owner = np.repeat(np.arange(len(per_question)), [len(qs) for qs in per_question])
    return flat, owner


def rrf_by_owner(
    result: StageResult, owner: np.ndarray, n_questions: int, k: int, depth: int, n_chunks: int
) -> StageResult:
    """Fuse the ranked lists of each question's queries: score = sum of 1 / (k + rank)."""
    n_rows, width = result.ids.shape
    ranks = np.broadcast_to(np.arange(1, width + 1), (n_rows, width))
    valid = result.ids >= 0
    q = np.broadcast_to(owner[:, None], (n_rows, width))[valid]
    keys = q * n_chunks + result.ids[valid]
    unique, inverse = np.unique(keys, return_inverse=True)
    summed = np.bincount(inverse, weights=(1.0 / (k + ranks))[valid])
    uq, chunk = unique // n_chunks, unique % n_chunks
    order = np.lexsort((chunk, -summed, uq))  # per question: best first, ties lower chunk first
    uq, chunk, summed = uq[order], chunk[order], summed[order]
    counts = np.bincount(uq, minlength=n_questions)
    col = np.arange(len(uq)) - np.repeat(np.cumsum(counts) - counts, counts)
    keep = col < depth
    ids = np.full((n_questions, depth), -1, dtype=np.int64)
    scores = np.full((n_questions, depth), -np.inf, dtype=np.float64)
    ids[uq[keep], col[keep]] = chunk[keep]
    scores[uq[keep], col[keep]] = summed[keep]
    return StageResult(ids, scores)


# -- pseudo-relevance feedback ----------------------------------------------------


def rm3_query_weights(
    index, query_tokens: list[str], fb_ids: np.ndarray, fb_scores: np.ndarray, config
) -> dict[str, float]:
    """The expanded query of one question: term -> weight (sums to 1)."""
    original: dict[str, float] = {}
    for t in query_tokens:
        original[t] = original.get(t, 0.0) + 1.0
    total = sum(original.values())
    original = {t: w / total for t, w in original.items()} if total else {}
    model = np.zeros(index.tf.shape[1])
    for d, score in zip(fb_ids, fb_scores):
        if d < 0:
            continue
        row = index.tf[d]
        length = row.data.sum()
        if length:
            model[row.indices] += score * row.data / length
    terms = index.terms
    allowed = [(i, model[i]) for i in np.flatnonzero(model) if ALLOWED_TERM.match(terms[i])]
    allowed.sort(key=lambda iw: (-iw[1], terms[iw[0]]))
    top = allowed[: config.fb_terms]
    norm = sum(w for _, w in top)
    relevance = {terms[i]: w / norm for i, w in top} if norm else {}
    a = config.original_weight
    return {t: a * original.get(t, 0.0) + (1 - a) * relevance.get(t, 0.0) for t in {**original, **relevance}}


def rocchio(
    queries: np.ndarray, docs: np.ndarray, first_ids: np.ndarray, config, normalize: bool
) -> np.ndarray:
    """``(1 - w)·q + w·mean(top fb_docs chunk vectors)``, row by row; unit length when the model's are."""
    top = first_ids[:, : config.fb_docs]
    valid = top >= 0
    gathered = docs[np.maximum(top, 0)] * valid[..., None]
    centroid = gathered.sum(1) / np.maximum(valid.sum(1), 1)[:, None]
    has_feedback = valid.any(1)[:, None]
    mixed = np.where(has_feedback, (1 - config.weight) * queries + config.weight * centroid, queries)
    if normalize:
        mixed = mixed / np.linalg.norm(mixed, axis=1, keepdims=True).clip(1e-12)
    return mixed.astype(np.float32)
