"""Which worker owns a sequence, and a request's trip to it and back.

A sequence's state (its slot, its implicit state tensors, the model instance's own
memory) lives in one process, so every request of a sequence must run in the same one.
The owner of a correlation id is fixed by the id alone (a CRC-32 of it, the same in every
process, unlike Python's salted `hash`), so any worker that receives a request of the
sequence knows where to send it without asking anyone.
"""

from __future__ import annotations

import zlib
from typing import Any

from ..errors import ErrorCode, NaiadError
from ..inference import InferenceRequest, InferenceResponse

__all__ = ["sequence_owner", "portable_request", "portable_responses", "restore_responses"]


def sequence_owner(correlation_id: Any, workers: int) -> int:
    """The index of the worker that runs every request of the sequence `correlation_id`."""
    kind = "s" if isinstance(correlation_id, str) else "i"
    return zlib.crc32(f"{kind}{correlation_id}".encode()) % workers


def portable_request(request: InferenceRequest) -> InferenceRequest:
    """The request without what belongs to this process (a response callback, a trace);
    its tensors travel by value (a tensor read from shared memory is copied)."""
    request.response_sender = None
    request.trace = None
    return request


def portable_responses(responses: list[InferenceResponse]) -> list[tuple[InferenceResponse, Any]]:
    """Responses with their errors as (code name, message): the error type does not pickle."""
    out = []
    for response in responses:
        error = response.error
        response.error = None
        out.append((response, None if error is None else (error.code.name, error.message)))
    return out


def restore_responses(portable: list[tuple[InferenceResponse, Any]]) -> list[InferenceResponse]:
    for response, error in portable:
        if error is not None:
            response.error = NaiadError(ErrorCode[error[0]], error[1])
    return [response for response, _ in portable]
