"""Requests and responses as the messages a front door and the model home exchange.

A message is a dict of plain values (naiad_wire.interprocess.messages): the request's or
response's fields, and each tensor as a descriptor whose bytes travel inline when small and
in the sender's shared-memory ring when not. The receiver builds the core types again; a
large tensor it receives is a numpy view of the ring, whose span stays reserved for as long
as the array lives (the rest of the ring is reused meanwhile).

What belongs to one process stays there: a response callback, a trace, the client's
shared-memory placements (a front door reads inputs from and writes outputs to the client's
regions itself) travel as parameters only. An input read from, or an output asked into, a
CUDA region keeps its placement (device_placement.py) as plain values, bound on arrival to the
receiver's regions; an output the backend wrote there itself crosses back without its bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from naiad_wire.interprocess.messages import decode_array, encode_array, pack_placing, plain_parameters
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter

from ..cuda_shared_memory import CudaSharedMemoryRegistry
from ..device_placement import CudaPlacement
from ..errors import ErrorCode, NaiadError
from ..inference import InferenceRequest, InferenceResponse, RequestedOutput
from ..tensor import Tensor

__all__ = [
    "pack_request",
    "unpack_request",
    "pack_response",
    "unpack_response",
    "pack_error",
    "unpack_error",
]


def pack_request(key: int, request: InferenceRequest, stream: bool, ring: RingWriter) -> bytes:
    """The frame of an inference request; call under `ring.lock`."""

    def build(ring: RingWriter) -> dict[str, Any]:
        message: dict[str, Any] = {
            "op": "infer",
            "key": key,
            "model": request.model_name,
            "inputs": [_pack_tensor(ring, tensor) for tensor in request.inputs],
        }
        # Only what is set: most requests carry none of these.
        if stream:
            message["stream"] = True
        if request.model_version:
            message["version"] = request.model_version
        if request.id:
            message["id"] = request.id
        if request.parameters:
            message["parameters"] = plain_parameters(request.parameters)
        if request.outputs:
            message["outputs"] = [_pack_output(o) for o in request.outputs]
        return message

    return pack_placing(build, ring)


def unpack_request(
    message: dict[str, Any], ring: RingReader, cuda_regions: CudaSharedMemoryRegistry | None = None
) -> InferenceRequest:
    """The request of an "infer" message; the caller then releases the message's ring span
    (`ring.consumed(message.get("mark"))`). Inputs and outputs placed in CUDA regions are
    bound to `cuda_regions`, this process's."""
    return InferenceRequest(
        model_name=message["model"],
        inputs=[_unpack_tensor(ring, descriptor, cuda_regions) for descriptor in message["inputs"]],
        model_version=message.get("version", ""),
        id=message.get("id", ""),
        outputs=[_unpack_output(output, cuda_regions) for output in message.get("outputs", ())],
        parameters=message.get("parameters", {}),
    )


def pack_response(key: int, response: InferenceResponse, ring: RingWriter) -> bytes:
    """The frame of one response (of a request's stream, or its only one); call under
    `ring.lock`."""

    def build(ring: RingWriter) -> dict[str, Any]:
        message: dict[str, Any] = {
            "op": "response",
            "key": key,
            "model": response.model_name,
            "version": response.model_version,
            "outputs": [_pack_tensor(ring, tensor) for tensor in response.outputs],
        }
        if response.id:
            message["id"] = response.id
        if response.parameters:
            message["parameters"] = plain_parameters(response.parameters)
        if response.error is not None:
            message["error"] = (response.error.code.name, response.error.message)
        if not response.final:
            message["more"] = True
        return message

    return pack_placing(build, ring)


def unpack_response(message: dict[str, Any], ring: RingReader) -> InferenceResponse:
    error = message.get("error")
    return InferenceResponse(
        model_name=message["model"],
        model_version=message["version"],
        id=message.get("id", ""),
        outputs=[_unpack_tensor(ring, descriptor) for descriptor in message["outputs"]],
        parameters=message.get("parameters", {}),
        error=None if error is None else unpack_error(error),
        final=not message.get("more", False),
    )


def pack_error(error: NaiadError) -> tuple[str, str]:
    return (error.code.name, error.message)


def unpack_error(error: tuple[str, str]) -> NaiadError:
    code, message = error
    return NaiadError(ErrorCode[code], message)


def _pack_tensor(ring: RingWriter, tensor: Tensor) -> tuple[Any, ...]:
    # The array's descriptor (4 values), then its parameters and its placement when it has
    # them, then the shape of an output written on the device: its stand-in's bytes stay here.
    if not tensor.on_host and tensor.placement is not None:
        descriptor = encode_array(ring, tensor.name, tensor.datatype, np.empty(0, tensor.data.dtype))
        return (*descriptor, plain_parameters(tensor.parameters), tensor.placement.plain(), tensor.shape)
    descriptor = encode_array(ring, tensor.name, tensor.datatype, tensor.data)
    if tensor.placement is not None:
        return (*descriptor, plain_parameters(tensor.parameters), tensor.placement.plain())
    if tensor.parameters:
        return (*descriptor, plain_parameters(tensor.parameters))
    return descriptor


def _unpack_tensor(
    ring: RingReader, descriptor: tuple[Any, ...], cuda_regions: CudaSharedMemoryRegistry | None = None
) -> Tensor:
    name, datatype, array = decode_array(ring, descriptor[:4])
    parameters = descriptor[4] if len(descriptor) > 4 else {}
    placement = CudaPlacement(*descriptor[5], cuda_regions) if len(descriptor) > 5 else None
    if len(descriptor) > 6 and placement is not None:
        written = Tensor.written_on_device(name, datatype, tuple(descriptor[6]), placement)
        written.parameters = parameters
        return written
    return Tensor(name, datatype, tuple(array.shape), array, parameters, placement)


def _pack_output(output: RequestedOutput) -> tuple[Any, ...]:
    if output.placement is not None:
        return (output.name, plain_parameters(output.parameters), output.placement.plain())
    return (output.name, plain_parameters(output.parameters))


def _unpack_output(output: tuple[Any, ...], cuda_regions: CudaSharedMemoryRegistry | None) -> RequestedOutput:
    placement = CudaPlacement(*output[2], cuda_regions) if len(output) > 2 else None
    return RequestedOutput(output[0], output[1], placement)
