"""The model-side API of the Python backend: what Triton's `triton_python_backend_utils`
offers a `model.py`, under naiad's own name.

A model imports it as Triton documents (``import triton_python_backend_utils as pb_utils``);
that top-level module re-exports this one. Everything here runs inside the model's process
(the stub) or, in in-process mode, inside the server; it needs only numpy and the standard
library, because a model may run in a virtual environment that has nothing else.

Custom metrics (`MetricFamily`, `Metric`) live in model_metrics.py and are re-exported here.

What reaches the server (responses, BLS calls, cancellation checks, log lines, metrics) goes
through a `Bridge` (see bridge.py), so this module is the same in both modes.
"""

from __future__ import annotations

import enum
import json
import struct
import threading
from typing import Any

import numpy as np

from .bridge import Bridge, current_bridge

__all__ = [
    "Tensor",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "TritonError",
    "TritonModelException",
    "ModelConfig",
    "Logger",
    "LogLevel",
    "PreferredMemory",
    "get_input_tensor_by_name",
    "get_output_tensor_by_name",
    "get_input_config_by_name",
    "get_output_config_by_name",
    "triton_string_to_numpy",
    "numpy_to_triton_type",
    "triton_to_numpy_type",
    "serialize_byte_tensor",
    "deserialize_bytes_tensor",
    "using_decoupled_model_transaction_policy",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "get_model_dir",
    "load_model",
    "unload_model",
    "is_model_ready",
    "TRITON_STRING_TO_NUMPY",
    "MetricFamily",
    "Metric",
    "MetricKind",
    "COUNTER",
    "GAUGE",
    "HISTOGRAM",
]

# Triton's flag values (TRITONSERVER_RequestFlag, ResponseCompleteFlag, RequestReleaseFlag).
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
# pb_utils's own numbering (the stub's MemoryType enum), not TRITONSERVER_MemoryType's.
TRITONSERVER_MEMORY_GPU = 0
TRITONSERVER_MEMORY_CPU = 1

# TRITONSERVER_DataType numbers <-> datatype names <-> numpy dtypes. BF16 has no numpy
# dtype; its tensors hold the raw uint16 words.
_TYPE_NUMBERS: dict[str, int] = {
    "BOOL": 1, "UINT8": 2, "UINT16": 3, "UINT32": 4, "UINT64": 5, "INT8": 6, "INT16": 7,
    "INT32": 8, "INT64": 9, "FP16": 10, "FP32": 11, "FP64": 12, "BYTES": 13, "BF16": 14,
}
_NUMBER_TO_TYPE = {number: name for name, number in _TYPE_NUMBERS.items()}
_NUMPY_OF_TYPE: dict[str, Any] = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
    "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
    "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
    "BYTES": np.object_, "BF16": np.uint16,
}
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    ("TYPE_STRING" if name == "BYTES" else f"TYPE_{name}"): dtype
    for name, dtype in _NUMPY_OF_TYPE.items()
    if name != "BF16"
}


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """`"TYPE_FP32"` -> `numpy.float32` (`TYPE_STRING` -> `numpy.object_`)."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int) -> Any:
    """A TRITONSERVER_DataType number -> numpy type (13, BYTES -> `numpy.object_`)."""
    name = _NUMBER_TO_TYPE.get(data_type)
    return None if name is None else _NUMPY_OF_TYPE[name]


def numpy_to_triton_type(data_type: Any) -> int | None:
    """A numpy type or dtype -> TRITONSERVER_DataType number; None when it has none."""
    name = _datatype_of_dtype(np.dtype(data_type)) if data_type is not None else None
    return None if name is None else _TYPE_NUMBERS[name]


# numpy dtype -> Triton datatype, for every numeric type (BF16 travels as uint16 words, so
# uint16 arrays are UINT16 here). A dict lookup: models build several tensors per request.
_DATATYPE_OF_DTYPE: dict[np.dtype, str] = {
    np.dtype(numpy_type): name for name, numpy_type in _NUMPY_OF_TYPE.items() if name not in ("BYTES", "BF16")
}


def _datatype_of_dtype(dtype: np.dtype) -> str | None:
    if dtype.kind in ("O", "S", "U"):
        return "BYTES"
    return _DATATYPE_OF_DTYPE.get(dtype)


def serialize_byte_tensor(input_tensor: np.ndarray) -> bytes | tuple[()] | None:
    """Each element as a 4-byte little-endian length and its bytes, in C order, as one
    `bytes` object. Like Triton's: `()` for an empty tensor, None for a non-bytes one."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype.kind not in ("O", "S", "U"):
        return None
    return encode_bytes_elements(input_tensor)


def encode_bytes_elements(array: np.ndarray) -> bytes:
    parts: list[bytes] = []
    for item in array.reshape(-1):
        if isinstance(item, bytes):
            data = item
        elif isinstance(item, str):
            data = item.encode("utf-8")
        elif isinstance(item, (bytearray, memoryview, np.bytes_)):
            data = bytes(item)
        else:
            data = str(item).encode("utf-8")
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    return b"".join(parts)


def deserialize_bytes_tensor(encoded_tensor: bytes | memoryview | np.ndarray) -> np.ndarray:
    """The inverse of `serialize_byte_tensor`: a flat object array of `bytes`."""
    view = memoryview(encoded_tensor).cast("B")
    items: list[bytes] = []
    offset, end = 0, len(view)
    while offset < end:
        if offset + 4 > end:
            raise TritonModelException("serialized BYTES data ends inside an element's length")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > end:
            raise TritonModelException("serialized BYTES data ends inside an element")
        items.append(bytes(view[offset : offset + length]))
        offset += length
    result = np.empty(len(items), dtype=object)
    result[:] = items
    return result


def text_argument(value: Any, what: str) -> str:
    """A string argument of the API as Triton's stub takes it: `str`, or `bytes` read as UTF-8
    (its C++ binding turns both into a std::string and hands back `str`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise TritonModelException(f"{what} must be UTF-8 text, got {bytes(value)!r}") from None
    raise TypeError(f"{what} must be a str (or bytes), got {type(value).__name__}")


def get_model_dir() -> str:
    """The directory of the running model's file (its version directory), as Triton gives it."""
    bridge = current_bridge()
    if bridge is None or not bridge.model_dir:
        raise TritonModelException("get_model_dir() is only available inside a loaded model")
    return bridge.model_dir


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load (or reload) a model, as the repository API's load does: `config` is a model
    config in JSON that replaces the model's own, `files` ({"file:1/model.onnx": content})
    its directory (and then needs `config`). Only in explicit model control mode, as in
    Triton; a failure raises TritonModelException with the server's reason."""
    _manage_model("load", model_name=text_argument(model_name, "load_model model_name"),
                  config=text_argument(config, "load_model config"), files=dict(files or {}))


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload a model (with `unload_dependents`, an ensemble's unused steps too)."""
    _manage_model("unload", model_name=text_argument(model_name, "unload_model model_name"),
                  unload_dependents=bool(unload_dependents))


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether the model (the version given, or the one its policy serves) is ready."""
    version = model_version if isinstance(model_version, int) else text_argument(model_version, "model_version")
    return bool(_manage_model("ready", model_name=text_argument(model_name, "is_model_ready model_name"),
                              model_version=str(version)))


def _manage_model(action: str, **arguments: Any) -> Any:
    bridge = current_bridge()
    if bridge is None:
        raise TritonModelException("the model loading API is only available inside a loaded model")
    return bridge.manage_model(action, arguments)


# -- errors --------------------------------------------------------------------------------


class TritonError(Exception):
    """An error a model puts into an `InferenceResponse` (or raises); its code decides the
    HTTP status and gRPC code the client sees."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    CODE_NAMES = ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE",
                  "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED")

    def __init__(self, message: str = "", code: int = INTERNAL) -> None:
        message = text_argument(message, "TritonError message")
        super().__init__(message)
        if code not in range(len(self.CODE_NAMES)):
            raise TritonModelException(f"TritonError code {code!r} is not one of TritonError's codes")
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def code_name(self) -> str:
        return self.CODE_NAMES[self._code]

    @classmethod
    def from_code_name(cls, name: str, message: str) -> "TritonError":
        code = cls.CODE_NAMES.index(name) if name in cls.CODE_NAMES else cls.INTERNAL
        return cls(message, code)

    def __str__(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self.code_name()})"


class TritonModelException(Exception):
    """Raised by this API when a model uses it wrongly; a model may raise it too."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self._message = message

    def message(self) -> str:
        return self._message


# -- tensors -------------------------------------------------------------------------------


class Tensor:
    """A named input or output: a numpy array and its Triton datatype."""

    __slots__ = ("_name", "_array", "_datatype")

    def __init__(self, name: str, tensor: Any, datatype: str | None = None) -> None:
        name = text_argument(name, "Tensor name")
        array = tensor if isinstance(tensor, np.ndarray) else np.asarray(tensor)
        if datatype is None:
            datatype = _datatype_of_dtype(array.dtype)
            if datatype is None:
                raise TritonModelException(
                    f"tensor '{name}': numpy dtype {array.dtype} has no Triton datatype"
                )
        if datatype == "BYTES" and array.dtype.kind in ("U", "S"):
            # Fixed-width string arrays pad and strip; BYTES elements are exact bytes.
            converted = np.empty(array.shape, dtype=object)
            converted.reshape(-1)[:] = [
                item.encode("utf-8") if isinstance(item, str) else bytes(item) for item in array.reshape(-1)
            ]
            array = converted
        self._name = name
        self._array = array
        self._datatype = datatype

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def shape(self) -> tuple[int, ...]:
        return tuple(self._array.shape)

    def triton_dtype(self) -> int:
        return _TYPE_NUMBERS[self._datatype]

    def datatype(self) -> str:
        """The KServe datatype name ("FP32", "BYTES", ...)."""
        return self._datatype

    def is_cpu(self) -> bool:
        # Tensors cross processes through host shared memory, so they are always on the CPU.
        return True

    def to_dlpack(self) -> Any:
        """A DLPack capsule of the array (for `torch.from_dlpack` and friends)."""
        return self.__dlpack__()

    def __dlpack__(self, stream: Any = None) -> Any:
        if self._datatype == "BYTES":
            raise TritonModelException(f"tensor '{self._name}': BYTES tensors have no DLPack form")
        return np.ascontiguousarray(self._array).__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU: tensors always live in host memory here

    @staticmethod
    def from_dlpack(name: str, dlpack_tensor: Any) -> "Tensor":
        """A Tensor from an object with `__dlpack__` (torch, cupy, numpy...) or a DLPack
        capsule; device tensors are copied to host memory."""
        if str(getattr(dlpack_tensor, "dtype", "")) == "torch.bfloat16":
            # numpy has no bfloat16: carry the raw 16-bit words, as naiad does for BF16.
            import torch  # a torch tensor was passed, so torch is importable

            words = dlpack_tensor.detach().cpu().contiguous().view(torch.int16)
            return Tensor(name, np.from_dlpack(words).view(np.uint16), "BF16")
        source = dlpack_tensor
        if not hasattr(source, "__dlpack__"):
            source = _CapsuleHolder(dlpack_tensor)
        try:
            array = np.from_dlpack(source)
        except (RuntimeError, TypeError, BufferError) as exc:
            cpu = getattr(dlpack_tensor, "cpu", None)
            if cpu is None:
                raise TritonModelException(f"tensor '{name}': cannot read DLPack tensor: {exc}") from exc
            array = np.from_dlpack(cpu())
        return Tensor(name, array)

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, {self._datatype}, shape={list(self._array.shape)})"


class _CapsuleHolder:
    """Lets numpy read a bare DLPack capsule (numpy only accepts `__dlpack__` objects)."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def get_input_tensor_by_name(inference_request: "InferenceRequest", name: str) -> Tensor | None:
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: "InferenceResponse", name: str) -> Tensor | None:
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    for spec in model_config.get("input", []):
        if spec.get("name") == name:
            return spec
    return None


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    for spec in model_config.get("output", []):
        if spec.get("name") == name:
            return spec
    return None


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


# -- responses -----------------------------------------------------------------------------


class InferenceResponse:
    """What a model returns for one request: output tensors, or an error."""

    def __init__(
        self,
        output_tensors: list[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        if output_tensors is None:
            output_tensors = []
        if not isinstance(output_tensors, (list, tuple)):
            raise TritonModelException('"output_tensors" must be a list of pb_utils.Tensor')
        for tensor in output_tensors:
            if not isinstance(tensor, Tensor):
                raise TritonModelException(
                    f'"output_tensors" must hold pb_utils.Tensor objects, got {type(tensor).__name__}'
                )
        if error is not None and not isinstance(error, TritonError):
            raise TritonModelException(f'"error" must be a pb_utils.TritonError, got {type(error).__name__}')
        if isinstance(parameters, str):
            parameters = json.loads(parameters) if parameters else {}
        self._outputs = list(output_tensors)
        self._error = error
        self._parameters: dict[str, Any] = dict(parameters or {})

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        """The response parameters as a JSON string (Triton's form)."""
        return json.dumps(self._parameters)

    def parameters_dict(self) -> dict[str, Any]:
        return self._parameters


class InferenceResponseSender:
    """Sends the responses of one request (decoupled models, or models that answer from
    another thread). The last call carries `TRITONSERVER_RESPONSE_COMPLETE_FINAL`.

    It enforces Triton's rules, with Triton's messages: a non-decoupled model sends exactly
    one response (a final flag alone may only follow it), and nothing goes after the final
    flag. The model sees a broken rule as a TritonModelException from `send`."""

    def __init__(self, request: "InferenceRequest", decoupled: bool) -> None:
        self._request = request
        self._decoupled = decoupled
        self._lock = threading.Lock()
        self._closed = False
        self._sent = 0

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if response is None and flags == 0:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero.")
        if response is not None and not isinstance(response, InferenceResponse):
            raise TypeError(f"send() takes a pb_utils.InferenceResponse, got {type(response).__name__}")
        final = flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL
        self._record(response is not None, final)
        self._request._bridge_or_raise().send_response(self._request, response, final)

    def _record(self, has_response: bool, final: bool) -> None:
        """Check one more response (or bare final flag) against the rules and record it;
        the model host also records here what a non-decoupled `execute` returns."""
        with self._lock:
            if not self._decoupled:
                if has_response and self._sent:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send more than one response.")
                if not has_response and final and not self._sent:
                    raise TritonModelException("Unable to send response. Non-decoupled model cannot send "
                                               "complete final before sending a response.")
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            self._closed = final
            self._sent += 1

    def is_cancelled(self) -> bool:
        return self._request.is_cancelled()


# -- requests ------------------------------------------------------------------------------


class InferenceTrace:
    """What `InferenceRequest.trace()` returns, as in Triton; naiad passes no trace context
    to Python models, so `get_context()` is always None (Triton's answer for an untraced
    request)."""

    def get_context(self) -> str | None:
        return None


class InferenceRequest:
    """A request the model received, or (built by the model) a BLS request to another
    model: ``InferenceRequest(model_name=..., inputs=..., requested_output_names=...)``."""

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: list[Tensor] | None = None,
        requested_output_names: "list[str] | set[str] | None" = None,
        model_name: str = "",
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: Any = None,
        trace: Any = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        if isinstance(parameters, str):
            parameters = json.loads(parameters) if parameters else {}
        if not isinstance(correlation_id, (int, str)):
            raise TritonModelException("Correlation ID must be integer or string")
        self._request_id = text_argument(request_id, "InferenceRequest request_id")
        self._correlation_id = correlation_id
        self._inputs = list(inputs or [])
        # A received request holds a set (as Triton's does); a BLS request keeps the list given.
        self._requested_output_names: Any = (
            requested_output_names if isinstance(requested_output_names, set) else
            [text_argument(name, "InferenceRequest requested_output_names") for name in requested_output_names or []]
        )
        self._model_name = text_argument(model_name, "InferenceRequest model_name")
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._parameters: dict[str, Any] = dict(parameters or {})
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        # Set by the host for requests the model receives.
        self._bridge: Bridge | None = None
        self._key: int = 0
        self._decoupled = False
        self._sender: InferenceResponseSender | None = None

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def requested_output_names(self) -> Any:
        return self._requested_output_names

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._model_version

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int) -> None:
        """Sequence flags of a BLS request (TRITONSERVER_REQUEST_FLAG_SEQUENCE_START/_END)."""
        self._flags = flags

    def timeout(self) -> int:
        return self._timeout

    def trace(self) -> "InferenceTrace":
        return InferenceTrace()

    def parameters(self) -> str:
        """The request parameters as a JSON string (Triton's form)."""
        return json.dumps(self._parameters)

    def parameters_dict(self) -> dict[str, Any]:
        return self._parameters

    def set_release_flags(self, flags: int) -> None:
        """`TRITONSERVER_REQUEST_RELEASE_RESCHEDULE`, set before execute returns, has the
        request executed again (models with `iterative_sequence: true`); a non-decoupled
        model puts None in its place in the returned list."""
        self._release_flags = flags

    def release_flags(self) -> int:
        return self._release_flags

    def get_response_sender(self) -> InferenceResponseSender:
        if self._bridge is None:
            raise TritonModelException("only a request the model received has a response sender")
        if self._sender is None:
            self._sender = InferenceResponseSender(self, self._decoupled)
        return self._sender

    def is_cancelled(self) -> bool:
        if self._bridge is None:
            return False
        return self._bridge.is_cancelled(self)

    def _bridge_or_raise(self) -> Bridge:
        if self._bridge is None:
            raise TritonModelException("this request was not received by the model")
        return self._bridge

    def _bls_bridge(self) -> Bridge:
        if not self._model_name:
            raise TritonModelException("a BLS request needs model_name")
        bridge = current_bridge()
        if bridge is None:
            raise TritonModelException("BLS requests can only be made while the model is loaded")
        return bridge

    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on another model. Returns its InferenceResponse (an error is in
        the response, not raised); with `decoupled=True`, an iterator over every response."""
        bridge = self._bls_bridge()
        if decoupled:
            return bridge.bls_stream(self)
        return bridge.bls(self)

    async def async_exec(self, decoupled: bool = False) -> Any:
        """`exec` for `async def execute`: awaits the response (or, with `decoupled=True`,
        returns an async iterator over every response)."""
        bridge = self._bls_bridge()
        if decoupled:
            return await bridge.bls_stream_async(self)
        return await bridge.bls_async(self)


# -- auto-complete ---------------------------------------------------------------------------


class ModelConfig:
    """The config handed to `TritonPythonModel.auto_complete_config` (Triton's JSON form as
    a dict); edits apply to the config the server then validates. Conflicts with what the
    config file says raise ValueError, as in Triton."""

    _TENSOR_KEYS = ("name", "data_type", "dims", "optional")

    def __init__(self, config: dict[str, Any] | str | bytes) -> None:
        self._config: dict[str, Any] = json.loads(config) if isinstance(config, (str, bytes)) else config

    def as_dict(self) -> dict[str, Any]:
        return self._config

    def _name(self) -> str:
        return str(self._config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        current = int(self._config.get("max_batch_size", 0) or 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but auto_complete_config of model "
                f"'{self._name()}' specified max_batch_size {max_batch_size}"
            )
        self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self) -> None:
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._config:
                raise ValueError(f"model '{self._name()}' configures {other}; auto_complete_config cannot "
                                 "set dynamic_batching")
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, policy: dict[str, Any]) -> None:
        unknown = [key for key in policy if key != "decoupled"]
        if unknown:
            raise ValueError(f"model_transaction_policy of model '{self._name()}' has unknown properties {unknown}")
        current = self._config.setdefault("model_transaction_policy", {})
        if "decoupled" in policy:
            if "decoupled" in current and bool(current["decoupled"]) != bool(policy["decoupled"]):
                raise ValueError(f"model '{self._name()}': decoupled is already {current['decoupled']}")
            current["decoupled"] = bool(policy["decoupled"])

    def add_input(self, spec: dict[str, Any]) -> None:
        self._add("input", spec)

    def add_output(self, spec: dict[str, Any]) -> None:
        self._add("output", spec)

    def _add(self, kind: str, spec: dict[str, Any]) -> None:
        unknown = [key for key in spec if key not in self._TENSOR_KEYS]
        if unknown:
            raise ValueError(f"{kind} {spec.get('name')!r} of model '{self._name()}' has properties "
                             f"other than {', '.join(self._TENSOR_KEYS)}: {unknown}")
        for key in ("name", "data_type", "dims"):
            if key not in spec:
                raise ValueError(f"{kind} {spec.get('name')!r} of model '{self._name()}' has no '{key}'")
        entries = self._config.setdefault(kind, [])
        for entry in entries:
            if entry.get("name") != spec["name"]:
                continue
            # The config file wins; auto-complete only fills in what it left out.
            if entry.get("data_type", "TYPE_INVALID") not in ("TYPE_INVALID", spec["data_type"]):
                raise ValueError(f"{kind} '{spec['name']}' of model '{self._name()}' has data_type "
                                 f"{entry['data_type']} in the config, auto_complete_config says {spec['data_type']}")
            if entry.get("dims") and [int(d) for d in entry["dims"]] != [int(d) for d in spec["dims"]]:
                raise ValueError(f"{kind} '{spec['name']}' of model '{self._name()}' has dims {entry['dims']} "
                                 f"in the config, auto_complete_config says {spec['dims']}")
            entry.setdefault("data_type", spec["data_type"])
            if not entry.get("dims"):
                entry["dims"] = list(spec["dims"])
            return
        entries.append(dict(spec))


# -- logging ---------------------------------------------------------------------------------


class Logger:
    """Log lines that appear in the server's log, tagged with the model. The levels are
    Triton's: the enum `Logger.LogLevel` and its members on `Logger` itself
    (`pb_utils.Logger.log(text, pb_utils.Logger.INFO)`)."""

    class LogLevel(enum.IntEnum):
        INFO = 0
        WARNING = 1
        ERROR = 2
        VERBOSE = 3

    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: int = LogLevel.INFO) -> None:
        text = text_argument(message, "Logger message")
        bridge = current_bridge()
        if bridge is None:
            import sys

            print(text, file=sys.stderr)
            return
        bridge.log(int(level), text)

    @staticmethod
    def log_info(message: str) -> None:
        Logger.log(message, Logger.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        Logger.log(message, Logger.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        Logger.log(message, Logger.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        Logger.log(message, Logger.VERBOSE)


# naiad's earlier name for the levels, kept for models written against it.
LogLevel = Logger.LogLevel


class PreferredMemory:
    """Accepted for BLS requests; tensors always travel in host memory here."""

    def __init__(self, preferred_memory_type: int = TRITONSERVER_MEMORY_CPU, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id



# Custom metrics, at the end: model_metrics raises TritonModelException, defined above.
from .model_metrics import COUNTER, GAUGE, HISTOGRAM, Metric, MetricFamily, MetricKind  # noqa: E402
