"""The typed configuration of one retrieval setup: every section, its bounds and defaults.

Models are frozen and reject unknown keys and NaN; :mod:`sweep.config.load`
reads them from YAML and names the file and key of any problem.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # NaN would pass every bound


class HoldoutPart(Strict):
    """One side of a seeded split of the questions; the sweep sets it when a dataset has no splits of its own."""

    part: Literal["tune", "heldout"]
    fraction: float = Field(0.3, gt=0, lt=1, description="share of questions held out")
    seed: int = 42


class DatasetConfig(Strict):
    loader: Literal["native", "beir", "span_csv", "python_reference", "files"] = "native"
    path: str = Field(
        ..., description='a folder or file; "bundled" for the python_reference example; files: the documents'
    )
    questions: str | None = Field(
        None, description="files: a JSONL (native questions) or CSV (question column) file; evidence optional"
    )
    glob: str = Field("**/*", description="files: which files under path (** recurses)")
    split: str | None = Field(None, description="BEIR qrels split, or the `split` field of native questions")
    corpora: str | None = Field(None, description="span_csv: folder of <corpus_id>.md files")
    include_title: bool = Field(True, description="prefix chunks with their document title for retrieval")
    relevance_threshold: int = Field(1, ge=0)
    max_questions: int | None = Field(None, ge=1, description="first N questions only, for quick looks")
    merge_overlapping_evidence: bool = Field(
        True,
        description="overlapping spans of one question in one document count as one item (highest grade)",
    )
    holdout: HoldoutPart | None = None
    lenient: bool = Field(
        False,
        description="drop invalid eval-set items (each listed) instead of failing; --lenient sets it, so a "
        "lenient sweep's best_config.yaml loads the way it was measured",
    )


class ChunkingSection(Strict):
    strategy: Literal["fixed", "recursive", "sentence", "markdown", "semantic", "document"] = "document"
    size: int = Field(200, ge=1, le=10_000_000, description="units per chunk (sentence: sentences)")
    overlap: int = Field(0, ge=0, le=10_000_000)
    unit: Literal["chars", "tokens"] = "tokens"
    tokenizer: str = "word"
    heading_prefix: bool = Field(False, description="markdown: index each chunk with its heading path first")
    model: str = Field("minilm-l6", description="semantic: the sentence embedding model")
    breakpoint_percentile: float = Field(
        20.0, ge=0, le=100, description="semantic: neighbour similarity below this percentile breaks"
    )
    min_size: int = Field(1, ge=1, le=10_000_000, description="semantic: units before a break is allowed")

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.strategy != "document" and self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class BM25Config(Strict):
    k1: float = Field(0.9, ge=0, le=100)
    b: float = Field(0.4, ge=0, le=1)
    epsilon: float = Field(
        0.25, ge=0, le=100, description="rank-bm25's floor for negative idf, times the mean idf"
    )
    lowercase: bool = True
    stopwords: Literal["none", "english"] = "english"
    stemming: Literal["none", "porter", "english"] = "porter"
    backend: Literal["sparse", "rank_bm25"] = "sparse"


Backend = Literal["torch", "onnx", "openvino"]
Precision = Literal["auto", "float32", "float16", "bfloat16", "int8"]
PRECISIONS = {  # what each backend runs; auto is float16 on CUDA with torch, float32 otherwise
    "torch": ("auto", "float32", "float16", "bfloat16"),
    "onnx": ("auto", "float32", "int8"),
    "openvino": ("auto", "float32", "bfloat16"),
}
BACKEND_EXTRAS = {"onnx": ("onnxruntime", "onnx"), "openvino": ("openvino", "onnx")}  # the extra's modules


def check_installed(backend: str) -> str:
    """``backend``, or ValueError naming the package and extra it needs: a sweep over backends refuses at start."""
    import importlib.util

    for module in BACKEND_EXTRAS.get(backend, ()):
        if importlib.util.find_spec(module) is None:
            raise ValueError(f"backend {backend} needs {module}: pip install 'rag-sweep[{backend}]'")
    return backend


def check_precision(backend: str, precision: str, device: str) -> None:
    """Raise ValueError when ``backend`` cannot run ``precision`` on ``device``."""
    if precision not in PRECISIONS[backend]:
        raise ValueError(
            f"backend {backend} runs precision {', '.join(PRECISIONS[backend][1:])}, not {precision}"
        )
    if backend == "openvino" and device not in ("auto", "cpu"):
        raise ValueError(f"backend openvino runs on the CPU here, not {device}: use torch or onnx there")


class DenseConfig(Strict):
    model: str = "minilm-l6"
    query_prefix: str = ""
    document_prefix: str = ""
    normalize: bool = True
    batch_size: int = Field(64, ge=1, le=65_536)
    max_seq_length: int | None = Field(
        None, ge=8, le=1_000_000, description="None keeps the model's own (256 for MiniLM)"
    )
    device: Literal["auto", "cpu", "cuda", "mps"] = Field("auto", description="auto: CUDA when present")
    backend: Backend = Field("torch", description="onnx, openvino: the exported model (cache_dir/models)")
    precision: Precision = Field(
        "auto", description="auto: float16 on CUDA with torch, float32 elsewhere; int8: onnx; bfloat16"
    )
    index: Literal["flat", "hnsw", "ivf"] = "flat"
    hnsw_m: int = Field(32, ge=4, le=1024)
    hnsw_ef_search: int = Field(
        16, ge=1, le=100_000, description="HNSW candidates kept while searching: recall against latency"
    )
    hnsw_ef_construction: int = Field(40, ge=4, le=100_000)
    ivf_lists: int = Field(256, ge=1, le=1_000_000)
    ivf_probe: int = Field(16, ge=1, le=1_000_000)

    _installed = field_validator("backend")(check_installed)

    @model_validator(mode="after")
    def _backend_runs(self):
        check_precision(self.backend, self.precision, self.device)
        return self


class EncodeConfig(Strict):
    """Where chunk sets are embedded: in this process (sharing shards with other workers) or as a Ray job."""

    engine: Literal["local", "ray"] = Field(
        "local", description="ray: a Ray Data job (pip install 'rag-sweep[ray]')"
    )
    ray_address: str | None = Field(
        None, description="None: RAY_ADDRESS, else a local Ray started for the run"
    )
    workers: int = Field(2, ge=1, le=100_000, description="model actors on the cluster")
    batch_rows: int = Field(1024, ge=1, le=1_000_000, description="texts per Ray batch (and per cache write)")
    cpus_per_worker: float = Field(1.0, ge=0)
    gpus_per_worker: float = Field(
        0.0, ge=0, description="> 0: actors on GPU nodes; device auto becomes cuda"
    )


class FusionConfig(Strict):
    method: Literal["linear", "rrf", "weighted_rrf"] = "linear"
    alpha: float = Field(
        0.5,
        ge=0,
        le=1,
        description="weight of the dense list (linear, weighted_rrf); 0 is pure BM25, 1 pure dense",
    )
    normalization: Literal["minmax", "zscore", "dbsf"] = "minmax"
    rrf_k: int = Field(60, ge=1, le=1_000_000)


class RerankConfig(Strict):
    enabled: bool = False
    kind: Literal["cross_encoder", "bi_encoder", "maxsim"] = "bi_encoder"
    model: str = "minilm-l6"
    depth: int = Field(20, ge=1, le=100_000)
    batch_size: int = Field(32, ge=1, le=65_536)
    max_seq_length: int | None = Field(
        None,
        ge=8,
        le=1_000_000,
        description="bi_encoder: as dense.max_seq_length; equal settings share cached embeddings",
    )
    backend: Backend = Field("torch", description="as dense.backend, for the reranking model")
    precision: Precision = Field("auto", description="as dense.precision")

    _installed = field_validator("backend")(check_installed)

    @model_validator(mode="after")
    def _backend_runs(self):
        check_precision(self.backend, self.precision, "auto")
        return self


class RM3Config(Strict):
    """Pseudo-relevance feedback for BM25 as in Anserini/Pyserini (their defaults)."""

    fb_docs: int = Field(10, ge=1, le=1000, description="feedback chunks from the first BM25 ranking")
    fb_terms: int = Field(10, ge=1, le=10_000, description="expansion terms kept from the relevance model")
    original_weight: float = Field(0.5, ge=0, le=1, description="weight of the original query in the mix")


class PRFConfig(Strict):
    """Rocchio-style feedback for dense retrieval: move the query toward its top chunks."""

    fb_docs: int = Field(3, ge=1, le=1000)
    weight: float = Field(
        0.3, ge=0, le=1, description="weight of the feedback centroid; 0 leaves the query as is"
    )


class LLMConfig(Strict):
    """An OpenAI-compatible chat endpoint for hyde and llm_multi_query; its key from ``key_env``."""

    url: str = Field(..., description="the API base, e.g. http://127.0.0.1:8000/v1")
    model: str = "gpt-4o-mini"
    prompt: str | None = Field(None, description="the instruction; None: the transform's own")
    key_env: str = "OPENAI_API_KEY"
    n: int = Field(3, ge=1, le=20, description="llm_multi_query: rewrites asked for")
    timeout: float = Field(60, gt=0, le=3600)


class QueryConfig(Strict):
    transform: Literal["none", "rm3", "dense_prf", "multi_query", "plugin", "hyde", "llm_multi_query"] = (
        "none"
    )
    rm3: RM3Config = RM3Config()
    prf: PRFConfig = PRFConfig()
    plugin: str | None = Field(None, description="module:function mapping a question to one or more queries")
    rrf_k: int = Field(60, ge=1, le=1_000_000, description="RRF constant fusing the lists of several queries")
    llm: LLMConfig | None = None

    @model_validator(mode="after")
    def _plugin_importable(self):
        if self.transform in ("hyde", "llm_multi_query") and self.llm is None:
            raise ValueError(f"transform {self.transform} needs llm: {{url: ..., model: ...}}")
        if self.transform == "plugin":
            if not self.plugin:
                raise ValueError("transform plugin needs plugin: module:function")
            from sweep.plugins import load_plugin

            load_plugin(self.plugin)  # raises ValueError naming what failed
        return self


class ExpandConfig(Strict):
    """Small-to-big: retrieve small chunks, serve the larger parent each lies in (scored as served)."""

    to: Literal["none", "parent"] = "none"
    strategy: Literal["fixed", "recursive", "sentence", "markdown", "document"] = Field(
        "recursive", description="how parents are cut: markdown = sections, document = the whole document"
    )
    size: int = Field(800, ge=1, le=10_000_000, description="units per parent (sentence: sentences)")
    unit: Literal["chars", "tokens"] | None = Field(None, description="None: the chunking's unit")


class RetrievalConfig(Strict):
    mode: Literal["bm25", "dense", "hybrid"] = "hybrid"
    candidates: int = Field(100, ge=1, le=100_000, description="results each first-stage retriever passes on")
    top_k: int = Field(100, ge=1, le=100_000, description="length of the final ranking")
    bm25: BM25Config = BM25Config()
    dense: DenseConfig = DenseConfig()
    fusion: FusionConfig = FusionConfig()
    rerank: RerankConfig = RerankConfig()
    query: QueryConfig = QueryConfig()
    expand: ExpandConfig = ExpandConfig()

    @field_validator("expand", mode="before")
    @classmethod
    def _expand_shorthand(cls, value):
        return {"to": value} if isinstance(value, str) else value  # `expand: parent`


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
    encode: EncodeConfig = EncodeConfig()
    cache_dir: str = ".cache/rag-sweep"
    source: str = Field("", exclude=True, description="the file it came from, for messages")

    @model_validator(mode="after")
    def _parents_larger(self):
        e, c = self.retrieval.expand, self.chunking
        if e.to == "none":
            return self
        if c.strategy == "document":
            raise ValueError("retrieval.expand: parent needs chunks smaller than documents (set chunking)")
        comparable = {c.strategy, e.strategy}.isdisjoint({"sentence", "document"})
        if comparable and (e.unit or c.unit) == c.unit and e.size <= c.size:
            raise ValueError(
                f"retrieval.expand.size ({e.size}) must be larger than chunking.size ({c.size}): "
                "parents hold their chunks"
            )
        return self
