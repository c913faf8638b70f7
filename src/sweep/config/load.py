"""Reading a configuration from YAML: duplicate keys refused, overrides applied, paths resolved.

Unknown keys and wrong types are errors that name the file and the dotted
key path; ``key=value`` overrides from the command line are applied before
validation so they are checked the same way. Relative dataset paths are
resolved against the config file's folder; ``cache_dir`` against the
working folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from sweep.config.schema import EvalConfig
from sweep.errors import ConfigError, DataError
from sweep.textfile import read_text


def parse_value(text: str) -> Any:
    """An override's value, read as YAML: ``0.5`` is a float, ``true`` a bool, ``[1, 2]`` a list."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def set_dotted(data: dict, key: str, value: Any, file: str = "") -> None:
    """Set ``a.b.c`` in nested dicts, creating sections on the way."""
    node = data
    parts = key.strip().split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(file, key, f"{part!r} is not a section")
        node = child
    node[parts[-1]] = value


def apply_overrides(data: dict, overrides: list[str], file: str) -> dict:
    for item in overrides:
        if "=" not in item:
            raise ConfigError(file, item, "an override must look like key.path=value")
        key, value = item.split("=", 1)
        set_dotted(data, key, parse_value(value), file)
    return data


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key written twice is an error (YAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(
                    "",
                    f"line {key_node.start_mark.line + 1}",
                    f"key {key!r} appears twice in one section (first at line {seen[key]}); "
                    "the second would silently replace the first: merge them",
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> dict:
    """A config file as a dict: UTF-8 (a BOM is fine), no duplicate keys, a mapping at the top."""
    if not path.is_file():
        raise ConfigError(str(path), "", "config file not found")
    try:
        text = read_text(path)
    except DataError as e:
        p = e.problems[0]
        raise ConfigError(str(path), f"line {p.line}" if p.line else "", p.message) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as e:
        raise e.located(str(path)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(str(path), where, f"not valid YAML: {getattr(e, 'problem', e)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "", f"expected a mapping of sections, got {type(data).__name__}")
    return data


SEARCH_KEYS = {
    "study",
    "storage",
    "tracking_uri",
    "trials",
    "objective",
    "space",
    "sampler",
    "seed",
    "timeout",
}


def _known_keys(loc: tuple) -> list[str]:
    """The keys a section of the config accepts, for the "unknown key" message."""
    model: type[BaseModel] | None = EvalConfig
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if model else None
        annotation = field.annotation if field else None
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    if model is None:
        return []
    names = [n for n in model.model_fields if n != "source"]
    return names + (["search"] if model is EvalConfig else [])


def validation_error(file: str, error: ValidationError) -> ConfigError:
    first = error.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
        if len(first["loc"]) == 1 and first["loc"][0] in SEARCH_KEYS:
            message += f"; it belongs under search: (search.{first['loc'][0]})"
        elif known := _known_keys(first["loc"]):
            message += f" (this section takes: {', '.join(known)})"
    elif first["type"] == "missing":
        message = "missing required key"
    elif first["type"] == "finite_number":
        message = f"must be a finite number (got {first.get('input')!r})"
    elif "input" in first and first["type"] not in ("value_error",):
        message += f" (got {first['input']!r})"[:120]
    more = len(error.errors()) - 1
    return ConfigError(file, key, message + (f"; and {more} more problem(s)" if more else ""))


def build_config(data: dict, file: str, base: Path | None = None) -> EvalConfig:
    try:
        config = EvalConfig.model_validate({**data, "source": file})
    except ValidationError as e:
        raise validation_error(file, e) from None
    if base is not None:
        config = resolve_paths(config, base)
    return config


def resolve_paths(config: EvalConfig, base: Path) -> EvalConfig:
    def absolute(p: str | None) -> str | None:
        if p is None or p == "bundled":
            return p
        path = Path(p).expanduser()
        return str(path if path.is_absolute() else (base / path).resolve())

    dataset = config.dataset.model_copy(
        update={
            "path": absolute(config.dataset.path),
            "corpora": absolute(config.dataset.corpora),
            "questions": absolute(config.dataset.questions),
        }
    )
    return config.model_copy(update={"dataset": dataset})  # cache_dir stays relative to the working folder


def blame_overrides(error: ConfigError, overrides: list[str]) -> ConfigError:
    """An error about a key a command-line override set names the override, not the file.

    Args:
        error: the validation error (``key`` is the dotted path).
        overrides: the ``key=value`` strings that were applied.

    Returns:
        The error, re-located to ``command-line override 'key=value'`` when one of them set that key.

    Example:
        >>> str(blame_overrides(ConfigError("c.yaml", "retrieval.top_k", "not an int"), ["retrieval.top_k=ten"]))
        "command-line override 'retrieval.top_k=ten' (on c.yaml): retrieval.top_k: not an int"
    """
    for item in reversed(overrides):
        key = item.split("=", 1)[0].strip()
        if (
            error.key == key
            or error.key.startswith(key + ".")
            or key.startswith(error.key + ".")
            and error.key
        ):
            where = f"command-line override {item!r}" + (f" (on {error.file})" if error.file else "")
            return ConfigError(where, error.key, error.message, list(error.hints))
    return error


def check_cache_dir(config: EvalConfig) -> None:
    """``cache_dir`` must exist (or be creatable) and take a write: found at start, not after the first trial.

    Raises:
        ConfigError: naming the ``cache_dir`` key, the path and the reason.
    """
    import tempfile

    root = Path(config.cache_dir).expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".write-check-") as fh:
            fh.write(b"ok")
            fh.flush()
    except OSError as e:
        raise ConfigError(
            config.source,
            "cache_dir",
            f"{root} is not a writable folder ({e.strerror or e})",
            ["point cache_dir at a folder you can write, with free space"],
        ) from None


def load_config(path: str | Path, overrides: list[str] = ()) -> EvalConfig:
    """Read, override and validate one configuration (the file's ``search:`` section is left out).

    Args:
        path: a YAML config file; relative paths in it are relative to the file.
        overrides: ``key=value`` changes, e.g. ``["retrieval.top_k=20"]`` (YAML values).

    Returns:
        The validated :class:`EvalConfig`.

    Raises:
        ConfigError: naming the file and key (or the override) and what to do.

    Example:
        >>> load_config("configs/hybrid.yaml", ["retrieval.mode=bm25"]).retrieval.mode
        'bm25'
    """
    path = Path(path)
    data = apply_overrides(read_yaml(path), list(overrides), str(path))
    data.pop("search", None)  # the sweep's own section (study.py) is not part of one configuration
    try:
        config = build_config(data, str(path), path.parent)
    except ConfigError as e:
        raise blame_overrides(e, list(overrides)) from None
    check_cache_dir(config)
    return config


def with_values(config: EvalConfig, changes: dict[str, Any]) -> EvalConfig:
    """A validated copy of ``config`` with dotted keys changed: what each sweep trial runs.

    Only the sections on the path of a change are validated again (their cross-field rules too, such
    as overlap < size); the rest are shared with ``config``. Relative dataset paths are resolved
    against the config file's folder, as :func:`load_config` does.

    Args:
        config: a validated configuration (its ``source`` names the file for messages).
        changes: ``{"chunking.size": 300, "retrieval.mode": "bm25"}``.

    Returns:
        The new :class:`EvalConfig`.

    Raises:
        ConfigError: naming the file and the dotted key of the first bad value.

    Example:
        >>> base = EvalConfig(dataset={"path": "bundled", "loader": "python_reference"})
        >>> with_values(base, {"chunking.size": 300}).chunking.size
        300
    """
    try:
        new = _with_values(config, changes, "")
    except ConfigError as e:
        raise e.located(config.source) from None
    if any(k in ("dataset.path", "dataset.corpora", "dataset.questions") for k in changes) and config.source:
        new = resolve_paths(new, Path(config.source).parent)
    return new


def _with_values(model: BaseModel, changes: dict[str, Any], prefix: str) -> BaseModel:
    nested: dict[str, dict[str, Any]] = {}
    update: dict[str, Any] = {}
    for key, value in changes.items():
        head, _, rest = key.partition(".")
        if head not in type(model).model_fields or head == "source":
            raise ConfigError("", prefix + key, "unknown key")
        if rest:
            child = getattr(model, head)
            if not isinstance(child, BaseModel):
                raise ConfigError("", prefix + head, f"{head!r} is not a section")
            nested.setdefault(head, {})[rest] = value
        else:
            update[head] = value
    for head, sub in nested.items():
        update[head] = _with_values(getattr(model, head), sub, f"{prefix}{head}.")
    fields = {name: getattr(model, name) for name in type(model).model_fields} | update
    try:
        return type(model).model_validate(fields)  # unchanged sections are instances: not validated again
    except ValidationError as e:
        error = validation_error("", e)
        raise ConfigError(
            "", prefix + error.key if error.key else prefix.rstrip("."), error.message
        ) from None
