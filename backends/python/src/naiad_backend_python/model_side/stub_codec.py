"""The model API's requests and responses to and from the records of stub_messages.py, in
the model's process: their tensors placed in (or read from) the shared-memory rings."""

from __future__ import annotations

import numpy as np

from naiad_wire.interprocess.messages import decode_array, encode_array, plain_parameters
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter

from .bridge import Bridge
from .pb_utils import InferenceRequest, InferenceResponse, Tensor, TritonError
from .stub_messages import Bls, Execute, ResponseItem

__all__ = ["response_item", "read_response", "bls_message", "DecodedInputs", "read_inputs", "received_requests"]

# Each request's inputs as decode_array returns them: (name, datatype, array).
DecodedInputs = list[list[tuple[str, str, np.ndarray]]]


def response_item(ring: RingWriter, response: InferenceResponse | None) -> ResponseItem | None:
    """A response of the model, its outputs placed in `ring` (call under `ring.lock`)."""
    if response is None:
        return None
    error = response._error
    return ResponseItem(
        [encode_array(ring, t._name, t._datatype, t._array) for t in response._outputs],
        None if error is None else (error.code_name(), error.message()),
        plain_parameters(response._parameters),
    )


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
        [encode_array(ring, t.name(), t.datatype(), t.as_numpy()) for t in request.inputs()],
    )


def read_inputs(ring: RingReader, message: Execute) -> DecodedInputs:
    """Every request's inputs out of the message and the ring, then the ring's span given back."""
    inputs = [[decode_array(ring, d) for d in item.inputs] for item in message.requests]
    ring.consumed(message.mark)
    return inputs


def received_requests(bridge: Bridge, message: Execute, inputs: DecodedInputs) -> list[InferenceRequest]:
    """The model's requests of an execute message, whose inputs `read_inputs` took."""
    model_name, model_version = message.model
    return [
        InferenceRequest._received(
            bridge,
            item.key,
            item.request_id,
            item.correlation_id,
            [Tensor._trusted(name, array, datatype) for name, datatype, array in decoded],
            set(item.output_names),
            model_name,
            model_version,
            item.flags,
            item.timeout_us,
            item.parameters,
        )
        for item, decoded in zip(message.requests, inputs)
    ]
