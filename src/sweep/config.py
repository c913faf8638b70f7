"""The typed configuration of one retrieval setup, read from YAML.

Unknown keys and wrong types are errors that name the file and the dotted
key path; ``key=value`` overrides from the command line are applied before
validation so they are checked the same way. Relative dataset paths are
resolved against the config file's folder; ``cache_dir`` against the
working folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ConfigError, DataError
from .textfile import read_text


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # NaN would pass every bound


class HoldoutPart(Strict):
    """One side of a seeded split of the questions; the sweep sets it when a dataset has no splits of its own."""

    part: Literal["tune", "heldout"]
    fraction: float = Field(0.3, gt=0, lt=1, description="share of questions held out")
    seed: int = 42


class DatasetConfig(Strict):
    loader: Literal["native", "beir", "span_csv", "python_reference"] = "native"
    path: str = Field(..., description='a folder or file; "bundled" for the python_reference example')
    split: str | None = Field(None, description="BEIR qrels split, or the `split` field of native questions")
    corpora: str | None = Field(None, description="span_csv: folder of <corpus_id>.md files")
    include_title: bool = Field(True, description="prefix chunks with their document title for retrieval")
    relevance_threshold: int = Field(1, ge=0)
    max_questions: int | None = Field(None, ge=1, description="first N questions only, for quick looks")
    merge_overlapping_evidence: bool = Field(
        True, description="overlapping spans of one question in one document count as one item (highest grade)")
    holdout: HoldoutPart | None = None


class ChunkingSection(Strict):
    strategy: Literal["fixed", "recursive", "document"] = "document"
    size: int = Field(200, ge=1, le=10_000_000)
    overlap: int = Field(0, ge=0, le=10_000_000)
    unit: Literal["chars", "tokens"] = "tokens"
    tokenizer: str = "word"

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.strategy != "document" and self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class BM25Config(Strict):
    k1: float = Field(0.9, ge=0, le=100)
    b: float = Field(0.4, ge=0, le=1)
    epsilon: float = Field(0.25, ge=0, le=100, description="rank-bm25's floor for negative idf, times the mean idf")
    lowercase: bool = True
    stopwords: Literal["none", "english"] = "english"
    stemming: Literal["none", "porter", "english"] = "porter"
    backend: Literal["sparse", "rank_bm25"] = "sparse"


class DenseConfig(Strict):
    model: str = "minilm-l6"
    query_prefix: str = ""
    document_prefix: str = ""
    normalize: bool = True
    batch_size: int = Field(64, ge=1, le=65_536)
    max_seq_length: int | None = Field(None, ge=8, le=1_000_000, description="None keeps the model's own (256 for MiniLM)")
    index: Literal["flat", "hnsw", "ivf"] = "flat"
    hnsw_m: int = Field(32, ge=4, le=1024)
    ivf_lists: int = Field(256, ge=1, le=1_000_000)
    ivf_probe: int = Field(16, ge=1, le=1_000_000)


class FusionConfig(Strict):
    method: Literal["linear", "rrf"] = "linear"
    alpha: float = Field(0.5, ge=0, le=1, description="weight of the dense scores; 0 is pure BM25, 1 pure dense")
    normalization: Literal["minmax", "zscore"] = "minmax"
    rrf_k: int = Field(60, ge=1, le=1_000_000)


class RerankConfig(Strict):
    enabled: bool = False
    kind: Literal["cross_encoder", "bi_encoder", "maxsim"] = "bi_encoder"
    model: str = "minilm-l6"
    depth: int = Field(20, ge=1, le=100_000)
    batch_size: int = Field(32, ge=1, le=65_536)
    max_seq_length: int | None = Field(None, ge=8, le=1_000_000, description="bi_encoder: as dense.max_seq_length; equal settings share cached embeddings")


class RM3Config(Strict):
    """Pseudo-relevance feedback for BM25 as in Anserini/Pyserini (their defaults)."""

    fb_docs: int = Field(10, ge=1, le=1000, description="feedback chunks from the first BM25 ranking")
    fb_terms: int = Field(10, ge=1, le=10_000, description="expansion terms kept from the relevance model")
    original_weight: float = Field(0.5, ge=0, le=1, description="weight of the original query in the mix")


class PRFConfig(Strict):
    """Rocchio-style feedback for dense retrieval: move the query toward its top chunks."""

    fb_docs: int = Field(3, ge=1, le=1000)
    weight: float = Field(0.3, ge=0, le=1, description="weight of the feedback centroid; 0 leaves the query as is")


class QueryConfig(Strict):
    transform: Literal["none", "rm3", "dense_prf", "multi_query", "plugin"] = "none"
    rm3: RM3Config = RM3Config()
    prf: PRFConfig = PRFConfig()
    plugin: str | None = Field(None, description="module:function mapping a question to one or more queries")
    rrf_k: int = Field(60, ge=1, le=1_000_000, description="RRF constant fusing the lists of several queries")

    @model_validator(mode="after")
    def _plugin_importable(self):
        if self.transform == "plugin":
            if not self.plugin:
                raise ValueError("transform plugin needs plugin: module:function")
            from .retrieval.query import load_plugin

            load_plugin(self.plugin)  # raises ValueError naming what failed
        return self


class RetrievalConfig(Strict):
    mode: Literal["bm25", "dense", "hybrid"] = "hybrid"
    candidates: int = Field(100, ge=1, le=100_000, description="results each first-stage retriever passes on")
    top_k: int = Field(100, ge=1, le=100_000, description="length of the final ranking")
    bm25: BM25Config = BM25Config()
    dense: DenseConfig = DenseConfig()
    fusion: FusionConfig = FusionConfig()
    rerank: RerankConfig = RerankConfig()
    query: QueryConfig = QueryConfig()


class EvaluationConfig(Strict):
    ks: tuple[Annotated[int, Field(ge=1, le=100_000)], ...] = (1, 3, 5, 10, 20, 100)
    hit_min_overlap: float = Field(0.5, gt=0, le=1)
    view: Literal["chunk", "document"] = "chunk"
    span_metrics_at: tuple[Annotated[int, Field(ge=1, le=100_000)], ...] = (5,)


class EvalConfig(Strict):
    """One configuration: what ``sweep eval`` runs and each sweep trial builds."""

    dataset: DatasetConfig
    chunking: ChunkingSection = ChunkingSection()
    retrieval: RetrievalConfig = RetrievalConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    cache_dir: str = ".cache/rag-sweep"
    source: str = Field("", exclude=True, description="the file it came from, for messages")


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
                raise ConfigError("", f"line {key_node.start_mark.line + 1}",
                                  f"key {key!r} appears twice in one section (first at line {seen[key]}); "
                                  "the second would silently replace the first: merge them")  # fmt: skip
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


SEARCH_KEYS = {"study", "storage", "tracking_uri", "trials", "objective", "space", "sampler", "seed", "timeout"}


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

    dataset = config.dataset.model_copy(update={"path": absolute(config.dataset.path), "corpora": absolute(config.dataset.corpora)})
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
        if error.key == key or error.key.startswith(key + ".") or key.startswith(error.key + ".") and error.key:
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
        raise ConfigError(config.source, "cache_dir", f"{root} is not a writable folder ({e.strerror or e})",
                          ["point cache_dir at a folder you can write, with free space"]) from None  # fmt: skip


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
