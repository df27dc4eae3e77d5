"""`InferenceRequest`: a request the model received, or a BLS request it makes to another model."""

from __future__ import annotations

import json
from typing import Any

from .bridge import Bridge, current_bridge
from .errors import TritonModelException, text_argument
from .flags import TRITONSERVER_REQUEST_RELEASE_ALL
from .inference_response import InferenceResponseSender
from .tensor import Tensor

__all__ = ["InferenceRequest", "InferenceTrace"]


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
        inputs: list[Tensor] | tuple[Tensor, ...] = (),
        requested_output_names: list[str] | set[str] | tuple[str, ...] = (),
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
        # Triton's binding checks each argument's type (TypeError); a None among the inputs
        # is its TritonModelException.
        if correlation_id is None:
            raise TypeError("InferenceRequest correlation_id must be an int or a str, got None")
        if not isinstance(correlation_id, (int, str)):
            raise TritonModelException("Correlation ID must be integer or string")
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"InferenceRequest inputs must be a list of pb_utils.Tensor, got {type(inputs).__name__}")
        for tensor in inputs:
            if not isinstance(tensor, Tensor):
                raise TritonModelException(
                    f"InferenceRequest inputs must hold pb_utils.Tensor objects, got {type(tensor).__name__}"
                )
        if not isinstance(requested_output_names, (list, tuple, set)):
            raise TypeError(
                "InferenceRequest requested_output_names must be a list of str, got "
                f"{type(requested_output_names).__name__}"
            )
        for number, what in ((model_version, "model_version"), (flags, "flags"), (timeout, "timeout")):
            if isinstance(number, bool) or not isinstance(number, int):
                raise TypeError(f"InferenceRequest {what} must be an int, got {type(number).__name__}")
        self._fill(
            text_argument(request_id, "InferenceRequest request_id"),
            correlation_id,
            list(inputs),
            # A received request holds a set (as Triton's does); a BLS request keeps the list given.
            requested_output_names
            if isinstance(requested_output_names, set)
            else [text_argument(name, "InferenceRequest requested_output_names") for name in requested_output_names],
            text_argument(model_name, "InferenceRequest model_name"),
            model_version,
            flags,
            timeout,
            dict(parameters or {}),
        )

    def _fill(
        self,
        request_id: str,
        correlation_id: int | str,
        inputs: list[Tensor],
        requested_output_names: Any,
        model_name: str,
        model_version: int,
        flags: int,
        timeout: int,
        parameters: dict[str, Any],
    ) -> None:
        """Every attribute, from arguments already checked (the one place that lists them)."""
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._inputs = inputs
        self._requested_output_names = requested_output_names
        self._model_name = model_name
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._parameters = parameters
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        # Set by the host for requests the model receives.
        self._bridge: Bridge | None = None
        self._key: int = 0
        self._decoupled = False
        self._sender: InferenceResponseSender | None = None
        # True once execute returned this request's response with no sender created: a
        # sender made afterwards starts closed.
        self._answered = False

    @classmethod
    def _received(
        cls,
        bridge: Bridge,
        key: int,
        request_id: str,
        correlation_id: int | str,
        inputs: list[Tensor],
        requested_output_names: set[str],
        model_name: str,
        model_version: int,
        flags: int,
        timeout: int,
        parameters: dict[str, Any],
    ) -> InferenceRequest:
        """A request the model receives, from parts the server has checked: none of the
        constructor's argument checks apply (the stub builds one per request served)."""
        request = cls.__new__(cls)
        request._fill(
            request_id,
            correlation_id,
            inputs,
            requested_output_names,
            model_name,
            model_version,
            flags,
            timeout,
            parameters,
        )
        request._bridge = bridge
        request._key = key
        return request

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

    def trace(self) -> InferenceTrace:
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
            if self._answered:
                self._sender._record(True, True)
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
