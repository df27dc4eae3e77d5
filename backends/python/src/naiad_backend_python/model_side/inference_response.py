"""What a model answers: `InferenceResponse`, and `InferenceResponseSender`, which sends the
responses of one request under Triton's rules."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from .errors import TritonError, TritonModelException
from .flags import TRITONSERVER_RESPONSE_COMPLETE_FINAL
from .tensor import Tensor

if TYPE_CHECKING:
    from .inference_request import InferenceRequest

__all__ = ["InferenceResponse", "InferenceResponseSender"]


class InferenceResponse:
    """What a model returns for one request: output tensors, or an error."""

    def __init__(
        self,
        output_tensors: list[Tensor] | tuple[Tensor, ...] = (),
        error: TritonError | None = None,
        parameters: dict[str, Any] | str | None = None,
    ) -> None:
        # As Triton's binding: the wrong type is a TypeError, a None among the tensors its
        # TritonModelException.
        if not isinstance(output_tensors, (list, tuple)):
            raise TypeError(f'"output_tensors" must be a list of pb_utils.Tensor, got {type(output_tensors).__name__}')
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

    def __init__(self, request: InferenceRequest, decoupled: bool) -> None:
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
                "Inference Response object must be provided when the response flags is set to zero."
            )
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
                        "Unable to send response. Non-decoupled model cannot send more than one response."
                    )
                if not has_response and final and not self._sent:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send "
                        "complete final before sending a response."
                    )
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            self._closed = final
            self._sent += 1

    def is_cancelled(self) -> bool:
        return self._request.is_cancelled()
