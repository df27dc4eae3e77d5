"""`Bridge`: how the model-side API reaches the server.

In process mode the stub implements it over the IPC channel; in in-process mode the
server implements it with direct calls. `utils` only ever talks to this interface.

BLS calls need the bridge of the model making them, yet `InferenceRequest(model_name=...)`
is built by model code with no link to it: the host sets a context variable around
`initialize`/`execute`, and a process-wide default covers threads a model starts itself
(the stub hosts exactly one model, so the default is always right there).
"""

from __future__ import annotations

import abc
import contextvars
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .pb_utils import InferenceRequest, InferenceResponse
    from .response_iterator import ResponseIterator

__all__ = ["Bridge", "current_bridge", "use_bridge", "set_default_bridge"]

_CURRENT: contextvars.ContextVar[Bridge | None] = contextvars.ContextVar("naiad_python_bridge", default=None)
_DEFAULT: list[Bridge] = []


class Bridge(abc.ABC):
    # The directory of the model's file, for `get_model_dir()`; set by the ModelHost.
    model_dir: str = ""

    @abc.abstractmethod
    def send_response(self, request: InferenceRequest, response: InferenceResponse | None, final: bool) -> None:
        """Deliver one response of a received request (from any thread)."""

    @abc.abstractmethod
    def is_cancelled(self, request: InferenceRequest) -> bool:
        """Whether the client of a received request went away."""

    @abc.abstractmethod
    def bls(self, request: InferenceRequest) -> InferenceResponse:
        """Run a BLS request and block until its one response."""

    @abc.abstractmethod
    def bls_stream(self, request: InferenceRequest) -> ResponseIterator:
        """Run a BLS request on a decoupled model; its responses as they arrive."""

    @abc.abstractmethod
    async def bls_async(self, request: InferenceRequest) -> InferenceResponse:
        """`bls` for coroutines running on the model's event loop."""

    @abc.abstractmethod
    async def bls_stream_async(self, request: InferenceRequest) -> ResponseIterator:
        """`bls_stream` for coroutines running on the model's event loop (the iterator
        works with `for`, as in Triton, and with `async for`)."""

    @abc.abstractmethod
    def manage_model(self, action: str, arguments: dict[str, Any]) -> Any:
        """The model loading API (model_control.py): "ready", "load" or "unload" another
        model; blocks until the server has done it, raises TritonModelException on failure."""

    @abc.abstractmethod
    def log(self, level: int, message: str) -> None:
        """Write a model log line to the server's log."""

    # Custom metrics (model_metrics.py). Handles are the model side's numbers for its
    # families and metrics; creating and reading raise with the server's reason.

    @abc.abstractmethod
    def metric_family_new(self, handle: int, name: str, description: str, kind: str) -> None:
        """Create (or join) the family `name` of kind counter/gauge/histogram."""

    @abc.abstractmethod
    def metric_family_delete(self, handle: int) -> None:
        """Drop a family and every metric created through it. Called from `__del__`, so it
        must never block: it may run inside another metric call of the same thread."""

    @abc.abstractmethod
    def metric_new(self, handle: int, family: int, labels: dict[str, str], buckets: list[float] | None) -> None:
        """Create (or join) the series with `labels` in a family."""

    @abc.abstractmethod
    def metric_update(self, handle: int, operation: str, value: float) -> None:
        """increment / set / observe, already checked by the model side (no answer awaited,
        but applied in the order the model made them)."""

    @abc.abstractmethod
    def metric_value(self, handle: int) -> float:
        """A counter's or gauge's current value, after every update made before the call."""


def current_bridge() -> Bridge | None:
    bridge = _CURRENT.get()
    if bridge is None and _DEFAULT:
        return _DEFAULT[-1]
    return bridge


def use_bridge(bridge: Bridge) -> contextvars.Token[Any]:
    return _CURRENT.set(bridge)


def set_default_bridge(bridge: Bridge) -> None:
    _DEFAULT.clear()
    _DEFAULT.append(bridge)
