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
    from .response_iterator import ResponseIterator
    from .utils import InferenceRequest, InferenceResponse

__all__ = ["Bridge", "current_bridge", "use_bridge", "set_default_bridge"]

_CURRENT: contextvars.ContextVar["Bridge | None"] = contextvars.ContextVar("naiad_python_bridge", default=None)
_DEFAULT: list["Bridge"] = []


class Bridge(abc.ABC):
    @abc.abstractmethod
    def send_response(self, request: "InferenceRequest", response: "InferenceResponse | None", final: bool) -> None:
        """Deliver one response of a received request (from any thread)."""

    @abc.abstractmethod
    def is_cancelled(self, request: "InferenceRequest") -> bool:
        """Whether the client of a received request went away."""

    @abc.abstractmethod
    def bls(self, request: "InferenceRequest") -> "InferenceResponse":
        """Run a BLS request and block until its one response."""

    @abc.abstractmethod
    def bls_stream(self, request: "InferenceRequest") -> "ResponseIterator":
        """Run a BLS request on a decoupled model; its responses as they arrive."""

    @abc.abstractmethod
    async def bls_async(self, request: "InferenceRequest") -> "InferenceResponse":
        """`bls` for coroutines running on the model's event loop."""

    @abc.abstractmethod
    def bls_stream_async(self, request: "InferenceRequest") -> "ResponseIterator":
        """`bls_stream` for coroutines running on the model's event loop (the iterator
        works with `for`, as in Triton, and with `async for`)."""

    @abc.abstractmethod
    def log(self, level: int, message: str) -> None:
        """Write a model log line to the server's log."""


def current_bridge() -> "Bridge | None":
    bridge = _CURRENT.get()
    if bridge is None and _DEFAULT:
        return _DEFAULT[-1]
    return bridge


def use_bridge(bridge: "Bridge") -> contextvars.Token[Any]:
    return _CURRENT.set(bridge)


def set_default_bridge(bridge: "Bridge") -> None:
    _DEFAULT.clear()
    _DEFAULT.append(bridge)
