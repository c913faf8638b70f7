"""User code named in a config (``package.module:function``), imported once and checked early."""

from __future__ import annotations

import importlib
from typing import Callable


def load_plugin(path: str) -> Callable[[str], str | list[str]]:
    """The callable a config names, so that a typo is a config error at load time, not a failed trial.

    Args:
        path: ``package.module:function``.

    Returns:
        The function.

    Raises:
        ValueError: saying what is wrong (the config loader turns it into a one-line error).

    Example:
        >>> load_plugin("os.path:basename")("a/b.txt")
        'b.txt'
    """
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"plugin {path!r} must look like package.module:function")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to fix
        raise ValueError(
            f"cannot import {module_name!r} for plugin {path!r}: {type(e).__name__}: {e}"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{module_name!r} has no callable {attr!r}")
    return fn


__all__ = ["load_plugin"]
