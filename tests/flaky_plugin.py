"""A query rewriter that fails while FLAKY_PLUGIN_FAILS is set: a trial error the user fixes between runs."""

from __future__ import annotations

import os


def rewrite(text: str) -> list[str]:
    if os.environ.get("FLAKY_PLUGIN_FAILS"):
        raise RuntimeError("the rewriting service is down")
    return [text]
