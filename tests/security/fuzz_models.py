"""The fuzz's models, written at test time, and what a valid request to each looks like.

Identity-like models that do not fail on their own, so a 5xx the fuzz meets is the server's:
numpy test-backend models (always), an ONNX model built with onnx.helper and a Python
`model.py` (each when its backend is installed). Together they cover every datatype (the
numpy `np_types` model has one optional input per datatype), batching and non-batching
models, a sequence model, single-input models a raw binary request can reach, and the two
backends whose instances live apart from the core (ONNX Runtime threads, Python stub
processes). `np_cfg`, `onnx_cfg` and `py_cfg` are what the config fuzz loads with overrides."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DATATYPES = (
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
    "BYTES",
)


def config_type(datatype: str) -> str:
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


@dataclass(frozen=True)
class Spec:
    """One input as the config declares it: `dims` without the batch dimension."""

    name: str
    datatype: str
    dims: tuple[int, ...]


@dataclass(frozen=True)
class FuzzModel:
    name: str
    max_batch_size: int
    inputs: tuple[Spec, ...]
    # The inputs a valid request sends (the rest are optional); all of them when None.
    required: tuple[str, ...] | None = None
    # Request parameters a valid request carries: a sequence model's are a one-request sequence.
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def largest_batch(self) -> int:
        """The batch a valid request may carry (a sequence batcher takes one at a time)."""
        return 1 if "sequence_id" in self.parameters else min(self.max_batch_size, 3)

    def valid_inputs(self, rng: np.random.Generator, batch: int = 1) -> list[tuple[Spec, tuple[int, ...], np.ndarray]]:
        """(spec, shape, data) of every input a valid request carries."""
        chosen = [s for s in self.inputs if self.required is None or s.name in self.required]
        result = []
        for spec in chosen:
            dims = tuple(int(rng.integers(1, 4)) if d == -1 else d for d in spec.dims)
            shape = (batch, *dims) if self.max_batch_size > 0 else dims
            result.append((spec, shape, sample(rng, spec.datatype, shape)))
        return result


def sample(rng: np.random.Generator, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Valid data of `datatype`: small numbers, booleans, short UTF-8 strings."""
    if datatype == "BYTES":
        words = ["", "a", "naïve", "日本", "x" * 7]
        flat = np.array([words[int(i)].encode() for i in rng.integers(0, len(words), int(np.prod(shape)))], object)
        return flat.reshape(shape)
    if datatype == "BOOL":
        return rng.integers(0, 2, shape).astype(bool)
    if datatype == "BF16":  # carried as FP32 values in JSON; the raw form is built by the caller
        return rng.integers(-4, 5, shape).astype(np.float32)
    dtype = {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64}.get(datatype)
    if dtype is not None:
        return (rng.integers(-8, 9, shape) / 2).astype(dtype)
    return rng.integers(0, 100, shape).astype(np.dtype(datatype.lower()))


def raw_bytes(datatype: str, data: np.ndarray) -> bytes:
    """The binary-tensor form of `data`: Triton's length-prefixed elements for BYTES."""
    if datatype == "BYTES":
        return b"".join(len(item).to_bytes(4, "little") + item for item in data.reshape(-1))
    if datatype == "BF16":
        return (np.ascontiguousarray(data, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    return np.ascontiguousarray(data).tobytes()


def json_data(datatype: str, data: np.ndarray) -> list[Any]:
    if datatype == "BYTES":
        return [item.decode() for item in data.reshape(-1)]
    return data.reshape(-1).tolist()


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


NUMPY_MODELS = [
    FuzzModel(
        "np_add_sub",
        8,
        (Spec("INPUT0", "FP32", (4,)), Spec("INPUT1", "FP32", (4,))),
    ),
    FuzzModel(
        "np_types",
        0,
        tuple(Spec(f"INPUT{i}", d, (-1, -1)) for i, d in enumerate(DATATYPES)),
        required=("INPUT0", "INPUT4", "INPUT9", "INPUT12", "INPUT13"),
    ),
    # Single-input models, the kind a raw binary request (Inference-Header-Content-Length: 0) can reach.
    FuzzModel("np_raw_fp16", 4, (Spec("INPUT0", "FP16", (-1,)),)),
    FuzzModel("np_raw_bytes", 0, (Spec("INPUT0", "BYTES", (1,)),)),
    # A sequence model without control inputs: the request parameters steer the batcher.
    FuzzModel(
        "np_sequence",
        8,
        (Spec("INPUT0", "INT32", (1,)),),
        parameters={"sequence_id": 7, "sequence_start": True, "sequence_end": True},
    ),
]
ONNX_MODEL = FuzzModel(
    "onnx_mixed",
    8,
    (
        Spec("IN_FP32", "FP32", (-1,)),
        Spec("IN_INT64", "INT64", (2,)),
        Spec("IN_BOOL", "BOOL", (3,)),
        Spec("IN_FP16", "FP16", (-1,)),
    ),
)
PYTHON_MODEL = FuzzModel(
    "py_mixed",
    0,
    (Spec("TEXT", "BYTES", (-1,)), Spec("COUNT", "INT64", (-1, 2)), Spec("VALUES", "FP32", (-1,))),
)

_NUMPY_CONFIGS = {
    "np_add_sub": """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]
dynamic_batching {}
parameters {key:"op" value {string_value:"add_sub"}}""",
    "np_types": 'backend: "numpy" max_batch_size: 0\n'
    + "input ["
    + ",".join(
        f'{{name:"INPUT{i}" data_type: {config_type(d)} dims:[-1, -1] optional: true}}' for i, d in enumerate(DATATYPES)
    )
    + "]\noutput ["
    + ",".join(f'{{name:"OUTPUT{i}" data_type: {config_type(d)} dims:[-1, -1]}}' for i, d in enumerate(DATATYPES))
    + "]",
    "np_raw_fp16": """backend: "numpy" max_batch_size: 4
input [{name:"INPUT0" data_type: TYPE_FP16 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP16 dims:[-1]}]""",
    "np_raw_bytes": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_STRING dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[1]}]""",
    # Slots enough, and a short idle time, that sequences a mutated request leaves open
    # (no END) neither hold up the valid ones nor pile up.
    "np_sequence": """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_INT32 dims:[1]}]
instance_group [{count: 2 kind: KIND_CPU}]
sequence_batching { max_sequence_idle_microseconds: 300000 direct { } }""",
    # The load API's target: config overrides replace this configuration.
    "np_cfg": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]""",
}

_ONNX_TYPES = {"FP32": "FLOAT", "INT64": "INT64", "BOOL": "BOOL", "FP16": "FLOAT16"}

PYTHON_IDENTITY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Every input that came back as the output of the same name with OUT_ before it."""

    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = [pb_utils.Tensor("OUT_" + t.name(), t.as_numpy()) for t in request.inputs()]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
'''


def _write(repo: Path, name: str, config: str) -> Path:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(config)
    return repo / name / "1"


def _onnx_identity(model: FuzzModel) -> bytes:
    from onnx import TensorProto, helper

    def info(prefix: str, spec: Spec) -> Any:
        dims: list[Any] = ["batch"] + [f"d{i}" if d == -1 else d for i, d in enumerate(spec.dims)]
        return helper.make_tensor_value_info(
            prefix + spec.name[3:], getattr(TensorProto, _ONNX_TYPES[spec.datatype]), dims
        )

    nodes = [helper.make_node("Identity", [s.name], ["OUT_" + s.name[3:]]) for s in model.inputs]
    graph = helper.make_graph(
        nodes, model.name, [info("IN_", s) for s in model.inputs], [info("OUT_", s) for s in model.inputs]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString()


def _io_config(model: FuzzModel, out_prefix: str, in_prefix_len: int) -> str:
    inputs = ",".join(
        f'{{name:"{s.name}" data_type: {config_type(s.datatype)} dims:{list(s.dims)}}}' for s in model.inputs
    )
    outputs = ",".join(
        f'{{name:"{out_prefix}{s.name[in_prefix_len:]}" data_type: {config_type(s.datatype)} dims:{list(s.dims)}}}'
        for s in model.inputs
    )
    return f"input [{inputs}]\noutput [{outputs}]"


def write_fuzz_repository(repo: Path) -> tuple[list[FuzzModel], list[str]]:
    """Lay out every model whose backend is installed; returns the infer targets and the
    models the config fuzz loads with overrides."""
    for name, config in _NUMPY_CONFIGS.items():
        _write(repo, name, config)
    models = list(NUMPY_MODELS)
    config_targets = ["np_cfg"]
    if installed("naiad_backend_onnx") and installed("onnx"):
        io = _io_config(ONNX_MODEL, "OUT_", 3)
        version = _write(
            repo,
            ONNX_MODEL.name,
            f'platform: "onnxruntime_onnx" max_batch_size: {ONNX_MODEL.max_batch_size}\n{io}\ndynamic_batching {{}}',
        )
        (version / "model.onnx").write_bytes(_onnx_identity(ONNX_MODEL))
        models.append(ONNX_MODEL)
        one = FuzzModel("onnx_cfg", 8, (Spec("IN_FP32", "FP32", (-1,)),))
        version = _write(
            repo, one.name, f'platform: "onnxruntime_onnx" max_batch_size: 8\n{_io_config(one, "OUT_", 3)}'
        )
        (version / "model.onnx").write_bytes(_onnx_identity(one))
        config_targets.append(one.name)
    if installed("naiad_backend_python"):
        io = _io_config(PYTHON_MODEL, "OUT_", 0)
        version = _write(repo, PYTHON_MODEL.name, f'backend: "python" max_batch_size: 0\n{io}')
        (version / "model.py").write_text(PYTHON_IDENTITY)
        models.append(PYTHON_MODEL)
        one = FuzzModel("py_cfg", 0, (Spec("TEXT", "BYTES", (-1,)),))
        version = _write(repo, one.name, f'backend: "python" max_batch_size: 0\n{_io_config(one, "OUT_", 0)}')
        (version / "model.py").write_text(PYTHON_IDENTITY)
        config_targets.append(one.name)
    return models, config_targets


# Valid config overrides in Triton's JSON form (what tritonclient's `load_model(config=...)`
# sends), the documents the config fuzz mutates, by the model they load: a numpy model (cheap
# to load, so most cases), an ONNX model and a Python model (their backends' own checks).
CONFIG_OVERRIDES: dict[str, dict[str, Any]] = {
    "np_cfg": {
        "name": "np_cfg",
        "backend": "numpy",
        "max_batch_size": 4,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "instance_group": [{"kind": "KIND_CPU", "count": 1}],
        "dynamic_batching": {"preferred_batch_size": [2], "max_queue_delay_microseconds": 100},
        "version_policy": {"latest": {"num_versions": 1}},
        "parameters": {"op": {"string_value": "identity"}},
    },
    "onnx_cfg": {
        "name": "onnx_cfg",
        "platform": "onnxruntime_onnx",
        "max_batch_size": 8,
        "input": [{"name": "IN_FP32", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUT_FP32", "data_type": "TYPE_FP32", "dims": [-1]}],
        "instance_group": [{"kind": "KIND_CPU", "count": 1}],
        "dynamic_batching": {},
    },
    "py_cfg": {
        "name": "py_cfg",
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "TEXT", "data_type": "TYPE_STRING", "dims": [-1]}],
        "output": [{"name": "OUT_TEXT", "data_type": "TYPE_STRING", "dims": [-1]}],
    },
}
# Backend and platform names a mutated override may switch to. Not pytorch or tensorflow:
# the first model of either imports its framework, seconds on its own (TensorFlow's import
# alone passes the fuzz's 5 s limit on a small machine), which is no hang of the server's.
BACKEND_NAMES = ["numpy", "python", "onnxruntime", "tensorrt", "ensemble", "caffe2", ""]
PLATFORM_NAMES = ["onnxruntime_onnx", "tensorrt_plan", "ensemble", "caffe2_netdef", ""]
