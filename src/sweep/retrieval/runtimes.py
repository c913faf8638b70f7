"""Inference backends: one sentence-transformers model run by torch, ONNX Runtime or OpenVINO.

Only the transformer core changes hands. Tokenisation, truncation, length-sorted batching, pooling and
normalisation stay sentence-transformers' own, so a backend can change speed and (with a lossy
precision) the vectors, never what is tokenised or how it is pooled. The core is exported once per
machine from the local weights with ``torch.onnx.export`` (never from a model hub, and not through
optimum, whose releases pin an older transformers) into ``cache_dir/models``; OpenVINO reads the same
ONNX file. Measured on 2 AVX-512 cores (README, Inference): OpenVINO in bfloat16 ~2x torch at cosine
0.99998; ONNX int8 (MatMul weights per channel, embeddings and pooling in float) ~1.4x at cosine 0.995.
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Callable

import numpy as np

from sweep.cache import content_key
from sweep.errors import ConfigError
from sweep.locks import file_lock

log = logging.getLogger(__name__)

EXPORT_FORMAT = 1  # bump when the exported graph changes: old files are then made anew


def exported_file(model, identity: str, cache_dir: str, precision: str) -> Path:
    """The ONNX file of ``model``'s transformer core at ``precision``, exported on first use.

    Two processes asking at once make it once: the second waits on a lock and reads the first's file,
    which appears whole (written beside it, then renamed).

    Args:
        model: a loaded ``SentenceTransformer`` or ``CrossEncoder`` (torch weights, on the CPU).
        identity: the model's cache identity (:func:`sweep.models.model_identity`).
        cache_dir: the run's cache folder; files go to ``cache_dir/models/<key>/``.
        precision: ``float32``, or ``int8`` (dynamic quantisation of the float32 file's MatMul weights).

    Returns:
        The file's path.

    Example:
        >>> exported_file(load_sentence_transformer("minilm-l6"), "m", ".cache", "float32")  # doctest: +SKIP
        PosixPath('.cache/models/3f…/model.onnx')
    """
    folder = Path(cache_dir) / "models" / content_key("onnx-core", identity, EXPORT_FORMAT)
    target = folder / ("model.onnx" if precision == "float32" else f"model.{precision}.onnx")
    if target.is_file():
        return target
    with file_lock(folder.with_suffix(".lock")):
        if target.is_file():  # another process made it while this one waited
            return target
        folder.mkdir(parents=True, exist_ok=True)
        log.info("exporting %s to ONNX (%s) in %s", identity, precision, folder)
        source = folder / "model.onnx"
        if not source.is_file():
            _atomically(source, lambda out: _export(model, out))
        if precision != "float32":
            _atomically(target, lambda out: _quantize(source, out))
    return target


def _atomically(target: Path, make: Callable[[Path], None]) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    os.close(fd)
    try:
        make(Path(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _core(model):
    """The ``Transformer`` module at the head of ``model`` and the name of the output its next module reads."""
    core = model[0]
    config = getattr(core, "modality_config", {}).get("text", {})
    output = config.get("method_output_name", "last_hidden_state")
    if (
        not hasattr(core, "model")
        or config.get("method", "forward") != "forward"
        or not isinstance(output, str)
    ):
        raise ConfigError(
            "",
            "backend",
            f"this model's first module ({type(core).__name__}) cannot be exported",
            ["use torch"],
        )
    return core, output


def _sample_features(model) -> dict:
    core = model[0]
    features = getattr(core, "preprocess", core.tokenize)(["an example", "a longer example text to trace"])
    return {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}


def _export(model, out: Path) -> None:
    import torch

    core, output = _core(model)
    features = _sample_features(model)
    names = list(features)

    class Core(torch.nn.Module):  # positional inputs in, the one tensor the next module reads out
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):
            return getattr(self.inner(**dict(zip(names, inputs)), return_dict=True), output)

    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    axes[output] = {0: "batch"} if output == "logits" else {0: "batch", 1: "tokens"}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # the tracer's notes on Python branches it folded: checked by the tests
        torch.onnx.export(
            Core(core.model.float().cpu()).eval(),
            tuple(features.values()),
            str(out),
            input_names=names,
            output_names=[output],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,  # the TorchScript exporter: no onnxscript needed, and a graph fit for quantising
        )


def _quantize(source: Path, out: Path) -> None:
    """int8 weights, per output channel, on the MatMuls only: embeddings, LayerNorm and pooling stay float.

    Quantising every op (the tool's default) cost MiniLM a mean cosine of 0.937 to float32; this keeps 0.995.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.disable(
        logging.WARNING
    )  # on the root logger: a line per tensor left alone, advice on pre-processing
    try:
        quantize_dynamic(
            str(source),
            str(out),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
        )
    finally:
        logging.disable(logging.NOTSET)


def _runner(file: Path, backend: str, precision: str, device: str) -> tuple[Callable, list[str]]:
    """A function from input arrays to the output array, and the input names the graph takes."""
    import torch

    threads = torch.get_num_threads()
    if backend == "onnx":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        providers = ["CPUExecutionProvider"]
        if device == "cuda":
            providers.insert(0, "CUDAExecutionProvider")
        session = ort.InferenceSession(str(file), options, providers=providers)
        return (lambda feeds: session.run(None, feeds)[0]), [i.name for i in session.get_inputs()]
    import openvino as ov

    core = ov.Core()
    hint = {"float32": "f32", "bfloat16": "bf16"}[precision]
    compiled = core.compile_model(
        core.read_model(str(file)),
        "CPU",
        {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY"},
    )
    request, result = compiled.create_infer_request(), compiled.output(0)
    return (lambda feeds: np.array(request.infer(feeds)[result])), [i.any_name for i in compiled.inputs]


def use_backend(model, identity: str, backend: str, precision: str, device: str, cache_dir: str):
    """Swap ``model``'s transformer core for the exported one run by ``backend``; returns ``model``.

    Args:
        model: a ``SentenceTransformer`` or ``CrossEncoder`` loaded with torch on the CPU.
        identity: the model's cache identity.
        backend: ``onnx`` or ``openvino`` (``torch`` leaves the model as it is).
        precision: ``float32`` or ``int8`` (onnx); ``float32`` or ``bfloat16`` (openvino).
        device: ``cpu``, or ``cuda`` for ONNX Runtime's CUDA provider.
        cache_dir: where exported files are kept.

    Returns:
        The same model object, now encoding through the backend.

    Example:
        >>> use_backend(model, "m", "openvino", "bfloat16", "cpu", ".cache").encode(["a"]).shape  # doctest: +SKIP
        (1, 384)
    """
    if backend == "torch":
        return model
    import torch

    core, output = _core(model)
    file = exported_file(model, identity, cache_dir, "int8" if precision == "int8" else "float32")
    run, inputs = _runner(file, backend, precision, device)

    class RuntimeCore(torch.nn.Module):
        """Stands where the Hugging Face model stood: same keyword inputs, same output name."""

        def __init__(self, config):
            super().__init__()
            self.config = config

        def forward(self, **features):
            ids = features["input_ids"]
            feeds = {
                name: (features[name] if name in features else torch.zeros_like(ids)).cpu().numpy()
                for name in inputs
            }
            return {output: torch.from_numpy(run(feeds))}

    core.model = RuntimeCore(core.model.config)
    return model
