"""`RequestTrace`: the timeline of one traced request, as Triton's trace extension names it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .trace_settings import TraceSetting

if TYPE_CHECKING:
    from ..inference import InferenceResponse
    from ..tensor import Tensor

__all__ = ["RequestTrace"]


@dataclass(eq=False)
class RequestTrace:
    """The timeline of one traced request. Timestamps are `time.monotonic_ns()` values,
    named as Triton names them (REQUEST_START, QUEUE_START, COMPUTE_START, COMPUTE_END,
    REQUEST_END; frontends add HTTP_RECV_START, GRPC_SEND_END...). `export` receives it
    once finished."""

    export: Callable[[RequestTrace], None]
    id: int
    model_name: str
    model_version: str
    request_id: str
    settings: TraceSetting
    protocol: str = ""
    timestamps: list[tuple[str, int]] = field(default_factory=list)
    tensors: list[dict[str, Any]] = field(default_factory=list)
    # A frontend that began the trace ends it after sending the response.
    owned_by_frontend: bool = False
    finished: bool = False

    def mark(self, name: str, ns: int | None = None) -> None:
        self.timestamps.append((name, time.monotonic_ns() if ns is None else ns))

    def compute(self, queue_start_ns: int, start_ns: int, end_ns: int) -> None:
        """Called by the instance runner when the request's batch ran."""
        self.timestamps += [("QUEUE_START", queue_start_ns), ("COMPUTE_START", start_ns), ("COMPUTE_END", end_ns)]

    def record_tensors(self, activity: str, tensors: list[Tensor]) -> None:
        if "TENSORS" not in self.settings.level:
            return
        for tensor in tensors:
            # An output the backend wrote on the GPU has no bytes here to show.
            data = tensor.data if tensor.on_host else None
            self.tensors.append(
                {
                    "activity": activity,
                    "name": tensor.name,
                    "dtype": tensor.datatype,
                    "shape": list(tensor.shape),
                    "data": [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in data.ravel().tolist()]
                    if data is not None
                    else None,
                }
            )

    def request_done(self, response: InferenceResponse | None = None) -> None:
        """The server's end of the request; exports unless a frontend still owns it."""
        self.mark("REQUEST_END")
        if response is not None and response.error is None:
            self.record_tensors("TENSOR_BACKEND_OUTPUT", response.outputs)
        if not self.owned_by_frontend:
            self.finish()

    def finish(self) -> None:
        if not self.finished:
            self.finished = True
            self.export(self)

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": self.id,
            "model_name": self.model_name,
            "model_version": self.model_version,
            "request_id": self.request_id,
            "timestamps": [{"name": name, "ns": ns} for name, ns in sorted(self.timestamps, key=lambda t: t[1])],
        }
        if self.protocol:
            entry["protocol"] = self.protocol
        if self.tensors:
            entry["tensors"] = self.tensors
        return entry
