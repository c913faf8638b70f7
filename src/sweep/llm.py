"""One call to an OpenAI-compatible chat-completions endpoint, with errors a user can act on.

Used by the LLM query transformations (HyDE, LLM multi-query) and the judging page's drafts. Any
server that speaks the protocol works: a local one (llama.cpp, vLLM, Ollama's /v1) or a hosted API
whose key is read from an environment variable, never from a config file.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from urllib.parse import urlparse

from sweep.errors import SweepError


class LLMError(SweepError):
    """The endpoint failed or answered something unusable; the message says which."""


def chat(
    url: str, model: str, system: str, user: str, key_env: str = "OPENAI_API_KEY", timeout: float = 60
) -> str:
    """The assistant's reply to one system + user message.

    Args:
        url: the API base, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        model: the model name the server expects.
        system: the instruction.
        user: the content (a question, a passage).
        key_env: the environment variable holding the API key (unset: no Authorization header).
        timeout: seconds.

    Returns:
        ``choices[0].message.content``.

    Raises:
        LLMError: unreachable, an HTTP error (with the server's words), or a reply without content.

    Example:
        >>> chat("http://127.0.0.1:8000/v1", "qwen2.5", "Answer briefly.", "What is BM25?")  # doctest: +SKIP
        'A ranking function ...'
    """
    endpoint = url.rstrip("/") + "/chat/completions"
    body = {
        "model": model,
        "temperature": 0.2,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    headers = {"Content-Type": "application/json"}
    if key := os.environ.get(key_env):
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(endpoint, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            reply = json.load(response)
    except urllib.error.HTTPError as e:
        detail = e.read()[:200].decode("utf-8", "replace").strip()
        raise LLMError(f"{endpoint} answered HTTP {e.code}: {detail or e.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        raise LLMError(f"{endpoint} did not answer ({getattr(e, 'reason', e)})") from None
    except json.JSONDecodeError:
        raise LLMError(f"{endpoint} answered something that is not JSON") from None
    try:
        return str(reply["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError):
        raise LLMError(f"{endpoint} answered without choices[0].message.content") from None


def reachable(url: str, timeout: float = 5) -> str | None:
    """None when something listens at the URL's host and port, else why not (checked before a sweep).

    Args:
        url: the API base.
        timeout: seconds for the connection.

    Returns:
        None, or the reason.

    Example:
        >>> reachable("http://127.0.0.1:9/v1")  # doctest: +SKIP
        'connection refused'
    """
    parts = urlparse(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return None
    except OSError as e:
        return e.strerror or str(e)


__all__ = ["LLMError", "chat", "reachable"]
