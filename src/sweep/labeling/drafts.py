"""Optional question drafts from an OpenAI-compatible chat endpoint, each with a checked quote.

A draft is a question an LLM wrote for one sampled passage, and the passage's words that answer
it. The quote must occur in the passage exactly (no fuzzy matching: a paraphrase is rejected, with
the reason), so an accepted draft is a labelled span like any other. Nothing enters the eval set
until the person judging accepts it, and accepted drafts are marked ``drafted`` there. Any server
speaking the chat-completions protocol works: a local one, or a hosted API with its key in an
environment variable.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from sweep.llm import LLMError, chat

PROMPT = (
    "You write evaluation questions for a retrieval system. Read the passage and write one question "
    "a user might ask that this passage answers. Then copy, word for word, the shortest part of the "
    'passage that answers it. Reply with JSON only: {"question": "...", "quote": "..."}'
)


GRADE_PROMPT = (
    "You judge search results. Grade how well the passage answers the question on this scale: {scale}. "
    'Reply with JSON only: {{"grade": N}}'
)


@dataclass(frozen=True)
class Draft:
    """A drafted question and its evidence: ``[start, end)`` of ``doc_id`` is exactly ``quote``."""

    question: str
    doc_id: str
    start: int
    end: int
    quote: str


class DraftClient:
    """Asks a chat-completions endpoint for one question per passage.

    Args:
        url: the API base, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        model: the model name the server expects.
        key_env: the environment variable holding the API key (none set: no Authorization header).
        timeout: seconds per request.

    Example:
        >>> client = DraftClient("http://127.0.0.1:8000/v1", "qwen2.5-7b-instruct")  # doctest: +SKIP
        >>> client.draft("guide.md", 0, "Run the installer, then restart the shell.")
        Draft(question='What do I do after running the installer?', ...)
    """

    def __init__(self, url: str, model: str, key_env: str = "OPENAI_API_KEY", timeout: float = 60):
        self.endpoint_base = url
        self.model, self.key_env, self.timeout = model, key_env, timeout

    def draft(self, doc_id: str, start: int, passage: str) -> Draft:
        """One draft for the passage ``passage`` found at ``start`` in ``doc_id``.

        Args:
            doc_id: the document.
            start: the passage's offset in the document's text.
            passage: the passage's text.

        Returns:
            The :class:`Draft`, its quote located in the document.

        Raises:
            LLMError: the request failed, the reply is not the JSON asked for, or the quote is not
                in the passage word for word.

        Example:
            >>> client.draft("guide.md", 120, passage).quote in passage  # doctest: +SKIP
            True
        """
        content = chat(self.endpoint_base, self.model, PROMPT, passage, self.key_env, self.timeout)
        match = re.search(r"\{.*\}", content, re.S)  # some models wrap the JSON in prose or fences
        try:
            value = json.loads(match.group(0) if match else content)
            question, quote = str(value["question"]).strip(), str(value["quote"]).strip()
        except (json.JSONDecodeError, KeyError, TypeError):
            raise LLMError(f"the reply is not {{question, quote}} JSON: {content[:120]!r}") from None
        if not question or not quote:
            raise LLMError("the reply has an empty question or quote")
        at = passage.find(quote)
        if at < 0:
            raise LLMError(f"rejected: the quote is not in the passage word for word: {quote[:80]!r}")
        return Draft(question, doc_id, start + at, start + at + len(quote), quote)

    def grade(self, question: str, passage: str, scale: dict[int, str]) -> int:
        """The LLM's grade of ``passage`` for ``question`` on ``scale`` (a draft judgment).

        Args:
            question: the question's text.
            passage: the pooled passage's text.
            scale: grade -> name, as the page shows it.

        Returns:
            A grade of the scale.

        Raises:
            LLMError: the request failed, or the reply is not ``{"grade": N}`` with N on the scale.

        Example:
            >>> client.grade("How do I install it?", "Run the installer.", {0: "no", 1: "yes"})  # doctest: +SKIP
            1
        """
        names = ", ".join(f"{g} = {name}" for g, name in scale.items())
        content = chat(
            self.endpoint_base,
            self.model,
            GRADE_PROMPT.format(scale=names),
            f"Question: {question}\n\nPassage: {passage}",
            self.key_env,
            self.timeout,
        )
        match = re.search(r"\{.*\}", content, re.S)
        try:
            grade = json.loads(match.group(0) if match else content)["grade"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise LLMError(f"the reply is not {{grade}} JSON: {content[:120]!r}") from None
        if isinstance(grade, bool) or not isinstance(grade, int) or grade not in scale:
            raise LLMError(f"the reply's grade {grade!r} is not on the scale {list(scale)}")
        return grade


__all__ = ["GRADE_PROMPT", "PROMPT", "Draft", "DraftClient"]
