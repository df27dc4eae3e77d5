"""Pure translation between `inference.*` gRPC messages and naiad's core types.

No sockets and no server here: `decode_infer_request` turns a `ModelInferRequest` into an
`InferenceRequest` (raising `NaiadError` naming what is wrong), `encode_infer_response`
turns an `InferenceResponse` into a `ModelInferResponse`. Tensor data stays numpy end to
end: `raw_input_contents` are viewed with `np.frombuffer` (through
`datatypes.tensor_from_raw`), outputs go out as `raw_output_contents`, the way tritonclient
reads them. Shared-memory inputs and outputs go through the server's one registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ...datatypes import DATATYPES, MAX_DIMS, input_from_raw, numpy_dtype, tensor_to_raw
from ...device_placement import CudaPlacement
from ...errors import NaiadError, shown
from ...inference import InferenceRequest, InferenceResponse, RequestedOutput
from ...protos import grpc_service_pb2 as pb
from ...shared_memory import SharedMemoryRegistry
from ...tensor import Tensor
from ..kserve.repository_requests import LoadRequest
from ..kserve.repository_requests import load_request as shared_load_request

__all__ = [
    "decode_parameters",
    "encode_parameters",
    "decode_infer_request",
    "encode_infer_response",
    "stream_error",
    "model_metadata_response",
    "statistics_response",
    "repository_index_response",
    "system_shared_memory_status_response",
    "cuda_shared_memory_status_response",
    "load_request",
    "check_output_placements",
    "SHM_REGION",
    "SHM_OFFSET",
    "SHM_BYTE_SIZE",
]

# Tensor parameters tritonclient sets to place a tensor in a registered region.
SHM_REGION = "shared_memory_region"
SHM_OFFSET = "shared_memory_offset"
SHM_BYTE_SIZE = "shared_memory_byte_size"

# The typed `InferTensorContents` field that carries each datatype (FP16/BF16 have none:
# they travel only as raw bytes).
_CONTENTS_FIELD: dict[str, str] = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}

_INT64_MAX = (1 << 63) - 1


# -- parameters -----------------------------------------------------------------------------


def decode_parameters(parameters: Mapping[str, pb.InferParameter]) -> dict[str, Any]:
    """`map<string, InferParameter>` as plain Python values (bool, int, float, str)."""
    decoded: dict[str, Any] = {}
    for key, value in parameters.items():
        choice = value.WhichOneof("parameter_choice")
        decoded[key] = getattr(value, choice) if choice is not None else None
    return decoded


def encode_parameters(values: Mapping[str, Any], target: Any) -> None:
    """Write plain values into a `map<string, InferParameter>`; other types are skipped
    (they are in-process objects no client could read)."""
    for key, value in values.items():
        if isinstance(value, bool):
            target[key].bool_param = value
        elif isinstance(value, (int, np.integer)):
            value = int(value)
            if value > _INT64_MAX:
                target[key].uint64_param = value
            else:
                target[key].int64_param = value
        elif isinstance(value, (float, np.floating)):
            target[key].double_param = float(value)
        elif isinstance(value, str):
            target[key].string_param = value
        elif isinstance(value, bytes):
            target[key].string_param = value.decode("utf-8", "replace")


# -- inference ------------------------------------------------------------------------------


def decode_infer_request(
    message: pb.ModelInferRequest,
    shared_memory: SharedMemoryRegistry | None = None,
    raw_in_place: list[memoryview] | None = None,
) -> InferenceRequest:
    """A `ModelInferRequest` as an `InferenceRequest`; raises INVALID_ARG naming the fault.

    Each input takes its data from, in this order: a shared-memory region named in its
    parameters, its typed `contents`, or the next entry of `raw_input_contents` (tritonclient
    sends raw bytes; the typed fields are for hand-written clients). `raw_in_place`: the
    `raw_input_contents` of a large request, read in place by the transport (rpc.py), which
    left them out of `message`.
    """
    model = message.model_name
    raw: Sequence[bytes | memoryview] = message.raw_input_contents if raw_in_place is None else raw_in_place
    raw_count = len(raw)
    raw_index = 0
    inputs: list[Tensor] = []
    for spec in message.inputs:
        name = spec.name
        datatype = spec.datatype
        if datatype not in DATATYPES:
            raise NaiadError.invalid(
                f"input '{name}' for model '{model}' has unknown datatype '{datatype}'; expected one of "
                + ", ".join(sorted(DATATYPES))
            )
        shape = tuple(spec.shape)
        if len(shape) > MAX_DIMS:
            raise NaiadError.invalid(
                f"input '{name}' for model '{model}': shape has {len(shape)} dimensions; a tensor has at most {MAX_DIMS}"
            )
        if shape and min(shape) < 0:
            raise NaiadError.invalid(
                f"input '{name}' for model '{model}' has a negative dimension in its shape {shown(list(shape))}"
            )
        parameters = decode_parameters(spec.parameters) if spec.parameters else {}
        placement: CudaPlacement | None = None
        if SHM_REGION in parameters:
            data, placement = _read_shared_memory(parameters, name, model, datatype, shape, shared_memory)
        elif spec.HasField("contents"):
            if raw_count:
                raise NaiadError.invalid(
                    f"input '{name}' for model '{model}' has typed contents, but the request also uses "
                    "raw_input_contents; send every input one way"
                )
            data = _from_contents(spec.contents, name, model, datatype, shape)
        elif raw_index < raw_count:
            data = input_from_raw(name, model, datatype, shape, raw[raw_index])
            raw_index += 1
        else:
            raise NaiadError.invalid(
                f"input '{name}' for model '{model}' carries no data: no raw_input_contents entry, typed "
                "contents or shared-memory region"
            )
        inputs.append(Tensor(name, datatype, shape, data, parameters, placement))
    if raw_index != raw_count:
        raise NaiadError.invalid(
            f"the request for model '{model}' has {raw_count} raw_input_contents entries, but only "
            f"{raw_index} of its inputs take raw data"
        )
    outputs = [_requested_output(o, model, shared_memory) for o in message.outputs]
    return InferenceRequest(
        model,
        inputs,
        model_version=message.model_version,
        id=message.id,
        outputs=outputs,
        parameters=decode_parameters(message.parameters) if message.parameters else {},
    )


def _from_contents(
    contents: pb.InferTensorContents, name: str, model: str, datatype: str, shape: tuple[int, ...]
) -> np.ndarray:
    field = _CONTENTS_FIELD.get(datatype)
    present = [f.name for f, _ in contents.ListFields()]
    if field is None:
        raise NaiadError.invalid(
            f"input '{name}' for model '{model}': {datatype} has no typed contents field; send it in raw_input_contents"
        )
    if any(other != field for other in present):
        raise NaiadError.invalid(
            f"input '{name}' for model '{model}' is {datatype}, whose typed data belongs in '{field}', "
            f"but the request fills " + ", ".join(f"'{p}'" for p in present)
        )
    values = getattr(contents, field)
    count = 1
    for dim in shape:
        count *= dim
    if len(values) != count:
        raise NaiadError.invalid(
            f"input '{name}' for model '{model}' has {len(values)} elements in '{field}', its shape "
            f"{list(shape)} needs {count}"
        )
    if datatype == "BYTES":
        array = np.empty(count, dtype=object)
        array[:] = list(values)
        return array.reshape(shape)
    try:
        return np.array(values, dtype=numpy_dtype(datatype)).reshape(shape)
    except OverflowError:
        raise NaiadError.invalid(
            f"input '{name}' for model '{model}' has values in '{field}' outside the range of {datatype}"
        ) from None


def _shm_location(parameters: Mapping[str, Any], what: str) -> tuple[str, int, int]:
    region = parameters.get(SHM_REGION)
    offset = parameters.get(SHM_OFFSET, 0)
    byte_size = parameters.get(SHM_BYTE_SIZE)
    if not isinstance(region, str) or not region:
        raise NaiadError.invalid(f"{what}: '{SHM_REGION}' must be a region name")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise NaiadError.invalid(f"{what}: '{SHM_OFFSET}' must be an integer")
    if isinstance(byte_size, bool) or not isinstance(byte_size, int):
        raise NaiadError.invalid(f"{what}: '{SHM_BYTE_SIZE}' must be given as an integer with '{SHM_REGION}'")
    return region, offset, byte_size


def _requested_output(
    output: pb.ModelInferRequest.InferRequestedOutputTensor, model: str, shared_memory: SharedMemoryRegistry | None
) -> RequestedOutput:
    parameters = decode_parameters(output.parameters) if output.parameters else {}
    placement = None
    if SHM_REGION in parameters and shared_memory is not None:
        try:
            region, offset, byte_size = _shm_location(parameters, f"output '{output.name}' for model '{model}'")
        except NaiadError:
            pass  # check_output_placements refuses it, before inference
        else:
            placement = shared_memory.placement(region, offset, byte_size)
    return RequestedOutput(output.name, parameters, placement)


def _read_shared_memory(
    parameters: dict[str, Any],
    name: str,
    model: str,
    datatype: str,
    shape: tuple[int, ...],
    shared_memory: SharedMemoryRegistry | None,
) -> tuple[np.ndarray, CudaPlacement | None]:
    """The input's bytes from the region, and where they sit on a GPU when the region is CUDA's."""
    what = f"input '{name}' for model '{model}'"
    region, offset, byte_size = _shm_location(parameters, what)
    if shared_memory is None:
        raise NaiadError.unsupported(f"{what}: shared memory is not available")
    for key in (SHM_REGION, SHM_OFFSET, SHM_BYTE_SIZE):
        parameters.pop(key, None)
    data = input_from_raw(name, model, datatype, shape, shared_memory.read(region, offset, byte_size))
    return data, shared_memory.placement(region, offset, byte_size, datatype)


def encode_infer_response(
    response: InferenceResponse,
    request: InferenceRequest | None = None,
    shared_memory: SharedMemoryRegistry | None = None,
) -> pb.ModelInferResponse:
    """An `InferenceResponse` as a `ModelInferResponse`.

    Every output gets one `raw_output_contents` entry at its own index (tritonclient pairs
    them by position); an output the request placed in shared memory is written there and
    its entry is left empty, as Triton does.
    """
    message = pb.ModelInferResponse(
        model_name=response.model_name, model_version=response.model_version, id=response.id
    )
    if response.parameters:
        encode_parameters(response.parameters, message.parameters)
    placements = _output_placements(request)
    raw = message.raw_output_contents
    for tensor in response.outputs:
        out = message.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        if tensor.parameters:
            encode_parameters(tensor.parameters, out.parameters)
        placement = placements.get(tensor.name)
        if placement is None:
            data = tensor_to_raw(tensor.datatype, tensor.data)
            raw.append(data if isinstance(data, bytes) else data.tobytes())
            continue
        region, offset, byte_size = placement
        if shared_memory is None:
            raise NaiadError.unsupported(f"output '{tensor.name}': shared memory is not available")
        shared_memory.write_output(region, offset, byte_size, tensor)
        raw.append(b"")
    return message


def _output_placements(request: InferenceRequest | None) -> dict[str, tuple[str, int, int]]:
    if request is None or not request.outputs:
        return {}
    placements: dict[str, tuple[str, int, int]] = {}
    for output in request.outputs:
        if SHM_REGION in output.parameters:
            what = f"output '{output.name}' for model '{request.model_name}'"
            placements[output.name] = _shm_location(output.parameters, what)
    return placements


def check_output_placements(request: InferenceRequest, shared_memory: SharedMemoryRegistry) -> None:
    """Fail before inference when a requested output names a region that cannot hold it
    anywhere (unknown region, or offset and size outside it)."""
    for region, offset, byte_size in _output_placements(request).values():
        shared_memory.check(region, offset, byte_size)


def stream_error(error: NaiadError, request_id: str = "") -> pb.ModelStreamInferResponse:
    """An error delivered inside the stream, as Triton sends it: the stream stays open."""
    message = pb.ModelStreamInferResponse(error_message=error.message)
    if request_id:
        message.infer_response.id = request_id
    return message


# -- metadata, statistics, repository, shared memory -------------------------------------------


def model_metadata_response(metadata: Mapping[str, Any]) -> pb.ModelMetadataResponse:
    message = pb.ModelMetadataResponse(
        name=metadata["name"], versions=metadata["versions"], platform=metadata["platform"]
    )
    for kind in ("inputs", "outputs"):
        target = getattr(message, kind)
        for tensor in metadata[kind]:
            target.add(name=tensor["name"], datatype=tensor["datatype"], shape=tensor["shape"])
    return message


def _duration(target: pb.StatisticDuration, value: Mapping[str, int]) -> None:
    target.count = value.get("count", 0)
    target.ns = value.get("ns", 0)


def statistics_response(stats: Iterable[Mapping[str, Any]]) -> pb.ModelStatisticsResponse:
    message = pb.ModelStatisticsResponse()
    for entry in stats:
        model = message.model_stats.add(
            name=entry["name"],
            version=entry["version"],
            last_inference=entry.get("last_inference", 0),
            inference_count=entry.get("inference_count", 0),
            execution_count=entry.get("execution_count", 0),
        )
        for key, value in entry.get("inference_stats", {}).items():
            _duration(getattr(model.inference_stats, key), value)
        for batch in entry.get("batch_stats", []):
            target = model.batch_stats.add(batch_size=batch["batch_size"])
            for key in ("compute_input", "compute_infer", "compute_output"):
                _duration(getattr(target, key), batch[key])
        for usage in entry.get("memory_usage", []):
            model.memory_usage.add(type=usage["type"], id=usage["id"], byte_size=usage["byte_size"])
        for key, response_stats in entry.get("response_stats", {}).items():
            response_target = model.response_stats[key]
            for field, value in response_stats.items():
                _duration(getattr(response_target, field), value)
    return message


def repository_index_response(rows: Iterable[Mapping[str, str]]) -> pb.RepositoryIndexResponse:
    message = pb.RepositoryIndexResponse()
    for row in rows:
        message.models.add(
            name=row["name"], version=row.get("version", ""), state=row.get("state", ""), reason=row.get("reason", "")
        )
    return message


def system_shared_memory_status_response(
    regions: Iterable[Mapping[str, Any]],
) -> pb.SystemSharedMemoryStatusResponse:
    message = pb.SystemSharedMemoryStatusResponse()
    for region in regions:
        entry = message.regions[str(region["name"])]
        entry.name = str(region["name"])
        entry.key = str(region["key"])
        entry.offset = int(region["offset"])  # type: ignore[arg-type]
        entry.byte_size = int(region["byte_size"])  # type: ignore[arg-type]
    return message


def cuda_shared_memory_status_response(
    regions: Iterable[Mapping[str, Any]],
) -> pb.CudaSharedMemoryStatusResponse:
    message = pb.CudaSharedMemoryStatusResponse()
    for region in regions:
        entry = message.regions[str(region["name"])]
        entry.name = str(region["name"])
        entry.device_id = int(region["device_id"])  # type: ignore[arg-type]
        entry.byte_size = int(region["byte_size"])  # type: ignore[arg-type]
    return message


def load_request(model: str, parameters: Mapping[str, pb.ModelRepositoryParameter]) -> LoadRequest:
    """A load request from its `ModelRepositoryParameter` map: `config` must be a string or
    bytes parameter (JSON text) and `file:<path>` ones bytes."""
    values: dict[str, object] = {}
    for key, value in parameters.items():
        choice = value.WhichOneof("parameter_choice")
        if key == "config" and choice not in ("string_param", "bytes_param"):
            raise NaiadError.invalid(f"failed to load '{model}': the 'config' parameter must be a JSON string")
        values[key] = getattr(value, choice) if choice is not None else None
    return shared_load_request(model, values)
