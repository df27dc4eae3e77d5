"""Protocol-free request and response types that every frontend decodes into."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .device_placement import CudaPlacement
from .errors import NaiadError, shown
from .tensor import Tensor

__all__ = ["RequestedOutput", "InferenceRequest", "InferenceResponse", "ResponseSender"]

# Called by a decoupled model for each response it sends; `final` closes the stream.
ResponseSender = Callable[["InferenceResponse | None", bool], None]


@dataclass(slots=True)
class RequestedOutput:
    """An output the client asked for, with its per-output parameters
    (`binary_data`, `classification`, shared-memory placement...)."""

    name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    # Where the client placed this output on a GPU (a CUDA shared-memory region): a backend
    # running on that GPU may write it there itself (`Tensor.written_on_device`).
    placement: CudaPlacement | None = None


@dataclass(slots=True)
class InferenceRequest:
    """One inference request, as the scheduler and backends see it.

    `model_version` is "" for the version the model's policy serves by default (the
    highest loaded). `outputs` empty means every output. Sequence, priority and timeout
    fields come from the request parameters Triton's clients send (`sequence_id`,
    `sequence_start`, `sequence_end`, `priority`, `timeout`); see `from_parameters`.
    """

    model_name: str
    inputs: list[Tensor]
    model_version: str = ""
    id: str = ""
    outputs: list[RequestedOutput] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    correlation_id: int | str = 0
    sequence_start: bool = False
    sequence_end: bool = False
    priority: int = 0
    timeout_us: int = 0
    # Set by the server for decoupled models; None otherwise.
    response_sender: ResponseSender | None = None
    # Set when the client went away or its deadline passed; backends may poll it.
    cancelled: bool = False
    # The request's `observability.request_trace.RequestTrace` when tracing sampled it; None otherwise.
    trace: Any = None
    # Set by a backend during `execute` to have the request scheduled again instead of
    # released (Triton's TRITONSERVER_REQUEST_RELEASE_RESCHEDULE); see naiad.backend.abi.
    reschedule: bool = False

    def input(self, name: str) -> Tensor | None:
        for tensor in self.inputs:
            if tensor.name == name:
                return tensor
        return None

    def take_control_parameters(self) -> None:
        """Move Triton's well-known request parameters into their typed fields.

        Frontends put everything the client sent into `parameters`; this is the one place
        that reads the reserved names, so HTTP, gRPC and in-process callers agree.
        """
        p = self.parameters
        if "sequence_id" in p:
            correlation_id = p.pop("sequence_id")
            # The sequence batcher keys its sequences by the id: a JSON list or object there
            # failed as unhashable (a 500), a float or a bool passed as another id.
            if isinstance(correlation_id, bool) or not isinstance(correlation_id, (numbers.Integral, str)):
                raise NaiadError.invalid(
                    f"request parameter 'sequence_id' must be an integer or a string, got {shown(correlation_id)}"
                )
            self.correlation_id = correlation_id if isinstance(correlation_id, str) else int(correlation_id)
        if "sequence_start" in p:
            self.sequence_start = bool(p.pop("sequence_start"))
        if "sequence_end" in p:
            self.sequence_end = bool(p.pop("sequence_end"))
        if "priority" in p:
            self.priority = _non_negative_int(p.pop("priority"), "priority")
        if "timeout" in p:
            self.timeout_us = _non_negative_int(p.pop("timeout"), "timeout")


def _non_negative_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise NaiadError.invalid(f"request parameter '{name}' must be an integer, got {shown(value)}")
    try:
        number = int(value)
    except ValueError:
        raise NaiadError.invalid(f"request parameter '{name}' must be an integer, got {shown(value)}") from None
    if number < 0:
        raise NaiadError.invalid(f"request parameter '{name}' must not be negative, got {number}")
    return number


@dataclass(slots=True)
class InferenceResponse:
    """The answer to one request: outputs, or an error; `final` is False on all but the
    last response of a decoupled stream."""

    model_name: str = ""
    model_version: str = ""
    id: str = ""
    outputs: list[Tensor] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    error: NaiadError | None = None
    final: bool = True

    def output(self, name: str) -> Tensor | None:
        for tensor in self.outputs:
            if tensor.name == name:
                return tensor
        return None

    @classmethod
    def failure(cls, error: NaiadError) -> InferenceResponse:
        return cls(error=error)
