"""Pure decode/encode functions between KServe v2 HTTP bodies and naiad's request and
response types, with Triton's binary-tensor and system-shared-memory extensions.

A body is a JSON object, optionally followed by binary tensor data; the header
`Inference-Header-Content-Length` says where the JSON ends. Binary input data is viewed
with `np.frombuffer` (no Python lists on that path); JSON data goes through one numpy
conversion per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from ...config.model_config import ModelConfig
from ...datatypes import DATATYPES, MAX_DIMS, input_from_raw, numpy_dtype, tensor_to_raw
from ...device_placement import CudaPlacement
from ...errors import NaiadError, shown
from ...inference import InferenceRequest, InferenceResponse, RequestedOutput
from ...shared_memory import SharedMemoryRegistry
from ...tensor import Tensor
from ..kserve.infer_parameters import check_reserved_parameters, take_binary_data_output
from .json_tensors import array_from_json, json_from_tensor

__all__ = [
    "EncodedResponse",
    "decode_json",
    "decode_infer_request",
    "decode_raw_request",
    "is_raw_request",
    "encode_infer_response",
    "split_body",
]

_SHM_REGION = "shared_memory_region"
_SHM_OFFSET = "shared_memory_offset"
_SHM_SIZE = "shared_memory_byte_size"
_DATATYPE_NAMES = ", ".join(sorted(DATATYPES))


@dataclass(slots=True)
class EncodedResponse:
    """An encoded inference response: the body, and the JSON header's length when binary
    tensor data follows it (the `Inference-Header-Content-Length` header)."""

    body: bytes
    header_length: int | None


def decode_json(data: bytes | memoryview, what: str = "the request body") -> Any:
    """Parse JSON; a syntax error is INVALID_ARG naming `what` and where it failed."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise NaiadError.invalid(f"malformed JSON in {what}: {exc}") from None


def split_body(body: bytes, header_length: str | None) -> tuple[memoryview, memoryview]:
    """The JSON part and the binary part of a body, as `Inference-Header-Content-Length` says."""
    view = memoryview(body)
    if header_length is None:
        return view, view[:0]
    try:
        length = int(header_length)
    except ValueError:
        raise NaiadError.invalid(f"Inference-Header-Content-Length must be an integer, got '{header_length}'") from None
    if length <= 0 or length > len(body):
        raise NaiadError.invalid(
            f"Inference-Header-Content-Length is {length}, but the body holds {len(body)} bytes; "
            "the JSON header must be 1 to the body's length bytes long (0 sends the whole body as the "
            "raw data of a single-input model)"
        )
    return view[:length], view[length:]


# -- requests ---------------------------------------------------------------------------


def is_raw_request(header_length: str | None) -> bool:
    """`Inference-Header-Content-Length: 0`: the body is the raw data of the model's only input."""
    return header_length is not None and header_length.strip() == "0"


def decode_raw_request(body: bytes, config: ModelConfig, model_version: str) -> InferenceRequest:
    """A raw binary request: no JSON, the whole body is the one input of the model. Its
    datatype comes from the config and its shape from the config dims (batch 1 for batching
    models), one variable dimension sized by the byte count; a BYTES input must be one
    element (dims [1]). Refusals use Triton's words. Outputs come back binary."""
    model = config.name
    if len(config.inputs) != 1:
        raise NaiadError.invalid(
            f"Raw request must only have 1 input (found 1) to be deduced but got {len(config.inputs)} inputs in "
            f"'{model}' model configuration"
        )
    spec = config.inputs[0]
    dims = list(spec.dims)
    batch = [1] if config.max_batch_size > 0 else []
    fixed = _element_count(tuple(d for d in dims if d != -1))
    if dims.count(-1) > 1:
        raise NaiadError.invalid(
            f"The shape of the raw input '{spec.name}' can not be deduced because there are more than one "
            f"variable-sized dimension (dims {dims} of model '{model}')"
        )
    if spec.datatype == "BYTES":
        if -1 in dims or fixed != 1:
            raise NaiadError.invalid(
                f"For BYTE datatype raw input '{spec.name}', the model must have input shape [1] "
                f"(model '{model}' has dims {dims}; the body is one element)"
            )
        shape = tuple(batch + dims)
        array = np.empty(1, dtype=object)
        array[0] = bytes(body)
        return InferenceRequest(model, [Tensor(spec.name, "BYTES", shape, array.reshape(shape))], model_version)
    if -1 in dims:
        itemsize = numpy_dtype(spec.datatype).itemsize
        if len(body) % (itemsize * fixed):
            raise NaiadError.invalid(
                f"raw binary request for input '{spec.name}' of model '{model}': {len(body)} bytes is not a "
                f"whole number of {spec.datatype} elements of dims {dims}"
            )
        dims = [len(body) // (itemsize * fixed) if d == -1 else d for d in dims]
    shape = tuple(batch + dims)
    array = input_from_raw(spec.name, model, spec.datatype, shape, memoryview(body))
    return InferenceRequest(model, [Tensor(spec.name, spec.datatype, shape, array)], model_version)


def decode_infer_request(
    body: bytes,
    header_length: str | None,
    model_name: str,
    model_version: str,
    shared_memory: SharedMemoryRegistry,
) -> tuple[InferenceRequest, bool]:
    """Decode an infer body into a request; also returns the `binary_data_output` default.

    Raises INVALID_ARG naming the input and the fault for every malformed part.
    """
    header, binary = split_body(body, header_length)
    key = bytes(header) if len(header) <= _TEMPLATE_MAX_BYTES else b""
    template = _templates.get(key) if key else None
    if template is not None and template.binary_size == len(binary):
        return template.request(binary, model_name, model_version), template.binary_output
    document = decode_json(header, "the inference request body")
    if not isinstance(document, dict):
        raise NaiadError.invalid("the inference request body must be a JSON object")
    request_id = document.get("id", "")
    if not isinstance(request_id, str):
        raise NaiadError.invalid(f"the request 'id' must be a string, got {shown(request_id)}")
    parameters = _parameters(document, "the request")
    # binary_data_output steers this frontend; the model does not see it.
    binary_output = take_binary_data_output(parameters)
    check_reserved_parameters(parameters)

    raw_inputs = document.get("inputs")
    if not isinstance(raw_inputs, list):
        raise NaiadError.invalid(
            "the inference request needs an 'inputs' list" if raw_inputs is None else "'inputs' must be a list"
        )
    inputs: list[Tensor] = []
    offset = 0
    for index, raw in enumerate(raw_inputs):
        tensor, used = _decode_input(raw, index, binary, offset, shared_memory, model_name)
        offset += used
        inputs.append(tensor)
    if offset != len(binary):
        raise NaiadError.invalid(
            f"the body holds {len(binary) - offset} bytes of binary data after the last binary input "
            f"(inputs' binary_data_size values add up to {offset}, {len(binary)} bytes follow the JSON)"
        )

    outputs = [_decode_output(raw, index, shared_memory) for index, raw in enumerate(_list(document, "outputs"))]
    if key and binary:
        _remember(key, _HeaderTemplate.of(request_id, parameters, binary_output, inputs, outputs, raw_inputs))
    request = InferenceRequest(
        model_name=model_name,
        inputs=inputs,
        model_version=model_version,
        id=request_id,
        outputs=outputs,
        parameters=parameters,
    )
    return request, binary_output


# A client sends the same JSON header with every binary request (the same names, shapes and
# datatypes; only the bytes after it change), so a header decoded once is kept and the next
# request that starts with the same bytes skips the JSON parse and its checks (add_sub's
# header: 6.9 -> 3.9 us per decode). Only headers whose inputs are all binary data and
# whose parameters are plain values are kept (each request gets its own copies), up to
# _TEMPLATE_COUNT of them, each at most _TEMPLATE_MAX_BYTES long; the oldest goes first.
_TEMPLATE_COUNT = 256
_TEMPLATE_MAX_BYTES = 2048
_PLAIN = (str, int, float, bool)


@dataclass(slots=True)
class _InputTemplate:
    name: str
    datatype: str
    shape: tuple[int, ...]
    size: int
    parameters: dict[str, Any]


@dataclass(slots=True)
class _HeaderTemplate:
    """A decoded header: what every request with the same header bytes is made of."""

    request_id: str
    parameters: dict[str, Any]
    binary_output: bool
    inputs: list[_InputTemplate]
    outputs: list[RequestedOutput]
    binary_size: int

    @staticmethod
    def of(
        request_id: str,
        parameters: dict[str, Any],
        binary_output: bool,
        inputs: list[Tensor],
        outputs: list[RequestedOutput],
        raw_inputs: list[Any],
    ) -> _HeaderTemplate | None:
        """The template of a header just decoded into these parts, or None when it cannot
        be reused (an input not in the binary part, a parameter that is not a plain value)."""
        kept: list[_InputTemplate] = []
        for tensor, raw in zip(inputs, raw_inputs):
            # Each input has exactly one source (_decode_input checked): binary, or not kept.
            size = raw.get("parameters", {}).get("binary_data_size")
            if size is None or not _plain(tensor.parameters):
                return None
            kept.append(_InputTemplate(tensor.name, tensor.datatype, tensor.shape, size, dict(tensor.parameters)))
        if not _plain(parameters) or not all(_plain(o.parameters) for o in outputs):
            return None
        if any(o.placement is not None for o in outputs):
            return None  # a CUDA region's placement is looked up for each request
        copies = [RequestedOutput(o.name, dict(o.parameters)) for o in outputs]
        return _HeaderTemplate(request_id, dict(parameters), binary_output, kept, copies, sum(i.size for i in kept))

    def request(self, binary: memoryview, model_name: str, model_version: str) -> InferenceRequest:
        inputs: list[Tensor] = []
        offset = 0
        for spec in self.inputs:
            end = offset + spec.size
            array = input_from_raw(spec.name, model_name, spec.datatype, spec.shape, binary[offset:end])
            inputs.append(Tensor(spec.name, spec.datatype, spec.shape, array, dict(spec.parameters)))
            offset = end
        return InferenceRequest(
            model_name=model_name,
            inputs=inputs,
            model_version=model_version,
            id=self.request_id,
            outputs=[RequestedOutput(o.name, dict(o.parameters)) for o in self.outputs],
            parameters=dict(self.parameters),
        )


_templates: dict[bytes, _HeaderTemplate] = {}


def _remember(key: bytes, template: _HeaderTemplate | None) -> None:
    if template is None:
        return
    if len(_templates) >= _TEMPLATE_COUNT:
        del _templates[next(iter(_templates))]
    _templates[key] = template


def _plain(parameters: dict[str, Any]) -> bool:
    return all(isinstance(value, _PLAIN) for value in parameters.values())


def _list(document: dict[str, Any], key: str) -> list[Any]:
    value = document.get(key, [])
    if not isinstance(value, list):
        raise NaiadError.invalid(f"'{key}' must be a list")
    return value


_ABSENT = object()


def _parameters(document: dict[str, Any], kind: str, name: str = "") -> dict[str, Any]:
    """The `parameters` object of the request, or of its input or output `name` (`kind`
    "the request", "input" or "output"), as a dict of its own."""
    value = document.get("parameters", _ABSENT)
    if value is _ABSENT:
        return {}
    if not isinstance(value, dict):
        where = f"{kind} '{name}'" if name else kind
        raise NaiadError.invalid(f"'parameters' of {where} must be a JSON object")
    return dict(value)


def _decode_input(
    raw: Any, index: int, binary: memoryview, offset: int, shared_memory: SharedMemoryRegistry, model: str
) -> tuple[Tensor, int]:
    """One input tensor, and how many bytes of the binary part it used."""
    if not isinstance(raw, dict):
        raise NaiadError.invalid(f"inputs[{index}] must be a JSON object")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise NaiadError.invalid(f"inputs[{index}] needs a 'name' string")
    datatype = raw.get("datatype")
    if not isinstance(datatype, str):
        raise NaiadError.invalid(f"input '{name}' needs a 'datatype' string")
    if datatype not in DATATYPES:
        raise NaiadError.invalid(f"input '{name}': unknown datatype '{datatype}'; expected one of {_DATATYPE_NAMES}")
    shape = _shape(raw.get("shape"), name)
    parameters = _parameters(raw, "input", name)
    present = ("data" in raw, "binary_data_size" in parameters, _SHM_REGION in parameters)
    if sum(present) != 1:
        sources = [s for s, there in zip(("'data'", "'binary_data_size'", f"'{_SHM_REGION}'"), present) if there]
        found = " and ".join(sources) if sources else "none of them"
        raise NaiadError.invalid(
            f"input '{name}' must carry its data in exactly one of 'data', the 'binary_data_size' parameter "
            f"or the '{_SHM_REGION}' parameter; it has {found}"
        )
    used = 0
    placement: CudaPlacement | None = None
    if "binary_data_size" in parameters:
        size = _non_negative_int(parameters.pop("binary_data_size"), f"input '{name}': 'binary_data_size'")
        if offset + size > len(binary):
            raise NaiadError.invalid(
                f"input '{name}': binary_data_size is {size}, but only {len(binary) - offset} bytes of binary "
                "data remain in the body"
            )
        array = input_from_raw(name, model, datatype, shape, binary[offset : offset + size])
        used = size
    elif _SHM_REGION in parameters:
        region = parameters.pop(_SHM_REGION)
        if not isinstance(region, str):
            raise NaiadError.invalid(f"input '{name}': '{_SHM_REGION}' must be a string")
        if _SHM_SIZE not in parameters:
            raise NaiadError.invalid(f"input '{name}': '{_SHM_REGION}' needs '{_SHM_SIZE}' too")
        size = _non_negative_int(parameters.pop(_SHM_SIZE), f"input '{name}': '{_SHM_SIZE}'")
        start = _non_negative_int(parameters.pop(_SHM_OFFSET, 0), f"input '{name}': '{_SHM_OFFSET}'")
        array = input_from_raw(name, model, datatype, shape, shared_memory.read(region, start, size))
        placement = shared_memory.placement(region, start, size, datatype)
    else:
        array = array_from_json(name, datatype, shape, raw["data"])
    return Tensor(name, datatype, shape, array, parameters, placement), used


def _shape(value: Any, name: str) -> tuple[int, ...]:
    if type(value) is list:
        if len(value) > MAX_DIMS:
            raise NaiadError.invalid(
                f"input '{name}': shape has {len(value)} dimensions; a tensor has at most {MAX_DIMS}"
            )
        for d in value:
            if type(d) is not int or d < 0:  # (bool is not int here: JSON true is no dimension)
                break
        else:
            return tuple(value)
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        raise NaiadError.invalid(f"input '{name}' needs a 'shape' list of integers, got {shown(value)}")
    raise NaiadError.invalid(f"input '{name}': shape {shown(value)} has a negative dimension")


def _non_negative_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NaiadError.invalid(f"{what} must be a non-negative integer, got {shown(value)}")
    return value


def _element_count(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def _decode_output(raw: Any, index: int, shared_memory: SharedMemoryRegistry) -> RequestedOutput:
    if not isinstance(raw, dict):
        raise NaiadError.invalid(f"outputs[{index}] must be a JSON object")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise NaiadError.invalid(f"outputs[{index}] needs a 'name' string")
    parameters = _parameters(raw, "output", name)
    binary = parameters.get("binary_data")
    if binary is not None and not isinstance(binary, bool):
        raise NaiadError.invalid(f"output '{name}': 'binary_data' must be true or false, got {shown(binary)}")
    placement = None
    if _SHM_REGION in parameters:
        if not isinstance(parameters[_SHM_REGION], str):
            raise NaiadError.invalid(f"output '{name}': '{_SHM_REGION}' must be a string")
        if _SHM_SIZE not in parameters:
            raise NaiadError.invalid(f"output '{name}': '{_SHM_REGION}' needs '{_SHM_SIZE}' too")
        size = _non_negative_int(parameters[_SHM_SIZE], f"output '{name}': '{_SHM_SIZE}'")
        offset = _non_negative_int(parameters.get(_SHM_OFFSET, 0), f"output '{name}': '{_SHM_OFFSET}'")
        placement = shared_memory.placement(parameters[_SHM_REGION], offset, size)
    return RequestedOutput(name, parameters, placement)


# -- responses --------------------------------------------------------------------------


def encode_infer_response(
    response: InferenceResponse,
    requested: list[RequestedOutput],
    binary_output: bool,
    shared_memory: SharedMemoryRegistry,
) -> EncodedResponse:
    """JSON (plus binary data when any output is binary) for one response.

    Outputs asked for with `binary_data` (or all, under the request's `binary_data_output`)
    travel as raw bytes after the JSON; outputs placed in a shared-memory region are
    written there and only described in the JSON.
    """
    by_name = {o.name: o.parameters for o in requested}
    outputs: list[dict[str, Any]] = []
    chunks: list[bytes | memoryview] = []
    for tensor in response.outputs:
        parameters = by_name.get(tensor.name, {})
        entry: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype, "shape": list(tensor.shape)}
        if _SHM_REGION in parameters:
            # Triton describes such an output by name, datatype and shape only.
            region, start, size = parameters[_SHM_REGION], parameters.get(_SHM_OFFSET, 0), parameters[_SHM_SIZE]
            shared_memory.write_output(region, start, size, tensor)
            outputs.append(entry)
            continue
        if tensor.parameters:
            entry["parameters"] = dict(tensor.parameters)
        if parameters.get("binary_data", binary_output):
            raw = tensor_to_raw(tensor.datatype, tensor.data)
            entry.setdefault("parameters", {})["binary_data_size"] = len(raw)
            chunks.append(raw)
        else:
            entry["data"] = json_from_tensor(tensor)
        outputs.append(entry)
    document: dict[str, Any] = {}
    if response.id:
        document["id"] = response.id
    document["model_name"] = response.model_name
    document["model_version"] = response.model_version
    if response.parameters:
        document["parameters"] = response.parameters
    document["outputs"] = outputs
    header = orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    if not chunks:
        return EncodedResponse(header, None)
    return EncodedResponse(b"".join([header, *chunks]), len(header))
