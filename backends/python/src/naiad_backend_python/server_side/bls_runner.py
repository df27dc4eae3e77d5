"""The server side of BLS: a model's `InferenceRequest(...).exec()` becomes a call to
`Server.infer` (or `infer_stream` for decoupled BLS), whichever mode the model runs in.
Failures come back as error responses, as Triton's BLS reports them, never as exceptions
in the calling model; like Triton's (measured), their code is always INTERNAL and the
message is the called model's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import numpy as np

from naiad.backend import ErrorCode, InferenceRequest, InferenceResponse, NaiadError, RequestedOutput, Tensor

if TYPE_CHECKING:
    from naiad.backend import InferenceService as Server

__all__ = ["BlsCall", "run_bls", "error_response", "cancelled_response"]

_SEQUENCE_START = 1
_SEQUENCE_END = 2


class BlsCall:
    """A BLS request in protocol-free form: what both modes hand to `run_bls`."""

    def __init__(
        self,
        model_name: str,
        model_version: int,
        inputs: list[tuple[str, str, np.ndarray]],
        requested_output_names: list[str],
        request_id: str = "",
        correlation_id: Any = 0,
        flags: int = 0,
        timeout: int = 0,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        self.model_name = model_name
        self.model_version = model_version
        self.inputs = inputs
        self.requested_output_names = requested_output_names
        self.request_id = request_id
        self.correlation_id = correlation_id
        self.flags = flags
        self.timeout = timeout
        self.parameters = parameters or {}

    def to_request(self) -> InferenceRequest:
        return InferenceRequest(
            model_name=self.model_name,
            model_version="" if self.model_version is None or int(self.model_version) < 0 else str(self.model_version),
            inputs=[Tensor(name, datatype, tuple(array.shape), array) for name, datatype, array in self.inputs],
            id=self.request_id,
            outputs=[RequestedOutput(name) for name in self.requested_output_names],
            parameters=dict(self.parameters),
            correlation_id=self.correlation_id,
            sequence_start=bool(self.flags & _SEQUENCE_START),
            sequence_end=bool(self.flags & _SEQUENCE_END),
            timeout_us=int(self.timeout or 0),
        )


def _as_bls_error(error: NaiadError) -> NaiadError:
    return error if error.code is ErrorCode.INTERNAL else NaiadError(ErrorCode.INTERNAL, error.message)


def error_response(error: NaiadError) -> InferenceResponse:
    return InferenceResponse(error=error, final=True)


def cancelled_response() -> InferenceResponse:
    """The last response of a BLS stream the calling model cancelled (`ResponseIterator.cancel`):
    the called request is cancelled (its model sees `is_cancelled()`), and the caller's
    iterator ends with this error."""
    return error_response(_as_bls_error(NaiadError.cancelled_request()))


async def run_bls(server: Server | None, call: BlsCall, decoupled: bool) -> AsyncIterator[InferenceResponse]:
    """Every response of the call; the last has `final=True`."""
    if server is None:
        yield error_response(NaiadError.unavailable("BLS is not available: the model has no server"))
        return
    try:
        request = call.to_request()
        if decoupled:
            async for response in server.infer_stream(request):
                if response.error is not None:
                    response.error = _as_bls_error(response.error)
                yield response
            return
        response = await server.infer(request)
        response.final = True
        yield response
    except NaiadError as exc:
        yield error_response(_as_bls_error(exc))
    except Exception as exc:  # noqa: BLE001 - a BLS failure is the calling model's error response
        yield error_response(NaiadError(ErrorCode.INTERNAL, f"BLS request to '{call.model_name}' failed: {exc}"))
