"""The model API's requests and responses to and from the records of stub_messages.py, in
the model's process: their tensors placed in (or read from) the shared-memory rings, or, where
the client put them in CUDA shared memory, read and written there on the GPU."""

from __future__ import annotations

from typing import Any

import numpy as np

from naiad_wire.interprocess.messages import NUMPY_OF_DATATYPE, decode_array, encode_array, plain_parameters
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter

from .bridge import Bridge
from .device_array import DeviceArray
from .device_memory import OpenRegions, device_runtime
from .pb_utils import InferenceRequest, InferenceResponse, Tensor, TritonError
from .stub_messages import Bls, Execute, RequestItem, ResponseItem, TensorDescriptor

__all__ = [
    "response_item",
    "read_response",
    "bls_message",
    "DecodedInputs",
    "read_inputs",
    "received_requests",
    "write_placed_outputs",
]

# Each request's inputs as decode_array returns them, (name, datatype, array), or, for an input
# in a client's CUDA region, its descriptor (`received_requests` opens the region).
DecodedInputs = list[list[tuple[str, str, np.ndarray] | TensorDescriptor]]


def response_item(
    ring: RingWriter, response: InferenceResponse | None, written: frozenset[str] = frozenset()
) -> ResponseItem | None:
    """A response of the model, its outputs placed in `ring` (call under `ring.lock`); those
    named in `written` are in the client's CUDA region already (`write_placed_outputs`)."""
    if response is None:
        return None
    error = response._error
    return ResponseItem(
        [
            encode_array(ring, t._name, t._datatype, t._array) if t._device is None else _gpu_output(ring, t, written)
            for t in response._outputs
        ],
        None if error is None else (error.code_name(), error.message()),
        plain_parameters(response._parameters),
    )


def _gpu_output(ring: RingWriter, tensor: Tensor, written: frozenset[str]) -> TensorDescriptor:
    if tensor._name in written:
        return (tensor._name, tensor._datatype, tensor.shape(), ("w",))
    return encode_array(ring, tensor._name, tensor._datatype, tensor._host())


def write_placed_outputs(
    items: list[RequestItem], responses: list[InferenceResponse | None], regions: OpenRegions
) -> list[frozenset[str]]:
    """Copy each output the model made on a GPU into the CUDA region its request placed it
    in, device to device; per response, the names written. An output that does not fit, or
    that CUDA fails to copy, goes through the host instead (which names a region too small)."""
    written: list[frozenset[str]] = []
    synchronized: set[int] = set()
    for item, response in zip(items, responses):
        names: set[str] = set()
        if item.placed_outputs and response is not None and response._error is None:
            for tensor in response._outputs:
                device, place = tensor._device, item.placed_outputs.get(tensor._name)
                if device is None or place is None or device.nbytes > place[3]:
                    continue
                handle, gpu, offset, _ = place
                try:
                    if device.device_id not in synchronized:
                        # The model's kernels may still be making the output on its stream.
                        device_runtime().synchronize(device.device_id)
                        synchronized.add(device.device_id)
                    target = regions.address(handle, gpu, offset)
                    device_runtime().copy(target, device.address, device.nbytes, device.device_id)
                except RuntimeError:
                    continue
                names.add(tensor._name)
        written.append(frozenset(names))
    return written


def read_response(ring: RingReader, item: ResponseItem | None) -> InferenceResponse:
    """A BLS response as the calling model sees it; None (only the final flag) is an empty one."""
    if item is None:
        return InferenceResponse()
    return InferenceResponse(
        [
            Tensor._trusted(name, array, datatype)
            for name, datatype, array in (decode_array(ring, d) for d in item.outputs)
        ],
        None if item.error is None else TritonError.from_code_name(*item.error),
        item.parameters or {},
    )


def bls_message(ring: RingWriter, qid: int, decoupled: bool, request: InferenceRequest) -> Bls:
    """A BLS request of the model, its inputs placed in `ring` (call under `ring.lock`)."""
    return Bls(
        qid,
        decoupled,
        request.model_name(),
        request.model_version(),
        request.request_id(),
        request.correlation_id(),
        request.flags(),
        request.timeout(),
        plain_parameters(request.parameters_dict()),
        list(request.requested_output_names()),
        [encode_array(ring, t.name(), t.datatype(), t._host()) for t in request.inputs()],
    )


def read_inputs(ring: RingReader, message: Execute) -> DecodedInputs:
    """Every request's inputs out of the message and the ring, then the ring's span given back."""
    inputs = [[decode_array(ring, d) if d[3][0] != "d" else d for d in item.inputs] for item in message.requests]
    ring.consumed(message.mark)
    return inputs


def received_requests(
    bridge: Bridge, message: Execute, inputs: DecodedInputs, regions: OpenRegions
) -> list[InferenceRequest]:
    """The model's requests of an execute message, whose inputs `read_inputs` took; inputs in
    a client's CUDA region are GPU tensors, read in place through `regions` (RuntimeError
    when this process cannot open them)."""
    model_name, model_version = message.model
    return [
        InferenceRequest._received(
            bridge,
            item.key,
            item.request_id,
            item.correlation_id,
            [Tensor._trusted(d[0], d[2], d[1]) if len(d) == 3 else _gpu_input(regions, *d) for d in decoded],
            set(item.output_names),
            model_name,
            model_version,
            item.flags,
            item.timeout_us,
            item.parameters,
        )
        for item, decoded in zip(message.requests, inputs)
    ]


def _gpu_input(
    regions: OpenRegions, name: str, datatype: str, shape: tuple[int, ...], location: tuple[Any, ...]
) -> Tensor:
    _, handle, gpu, offset = location
    address = regions.address(handle, gpu, offset)
    return Tensor._on_device(
        name, datatype, DeviceArray(address, gpu, tuple(shape), np.dtype(NUMPY_OF_DATATYPE[datatype]))
    )
