"""`InferenceService`: what a model may ask of the server it runs in.

Backends (BLS calls, model control from a model, custom metrics) and the ensemble
scheduler reach the server only through this protocol, never through `naiad.Server`
itself, so the layers below the server need not import it. `naiad.Server` satisfies it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..observability.custom_metrics import CustomMetricRegistry

__all__ = ["InferenceService", "ServedModel"]


class ServedModel(Protocol):
    """The loaded version that serves a model name."""

    def is_ready(self) -> bool: ...


class InferenceService(Protocol):
    """The server as seen from a model: inference, model control and custom metrics."""

    @property
    def custom_metrics(self) -> CustomMetricRegistry:
        """The registry of the metric families models define (Triton's custom metrics)."""
        ...

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        """Run one request; raises NaiadError for every failure."""
        ...

    def infer_stream(self, request: InferenceRequest) -> AsyncIterator[InferenceResponse]:
        """Every response a (decoupled) request produces, in order."""
        ...

    def start_infer(
        self,
        request: InferenceRequest,
        done: Callable[[InferenceResponse | NaiadError], None],
        partial_outputs: bool = False,
    ) -> Callable[[], None] | None:
        """Start one request without a coroutine: `done` gets its response or error on the
        event loop; the result cancels it. Raises NaiadError for input refused at once;
        None for a decoupled model (use `infer_stream`)."""
        ...

    def model(self, name: str, version: str = "") -> ServedModel:
        """The loaded version serving `name`/`version`; NOT_FOUND or UNAVAILABLE otherwise."""
        ...

    def model_ready(self, name: str, version: str = "") -> bool: ...

    async def load_model(
        self, name: str, config: dict[str, Any] | None = None, files: dict[str, bytes] | None = None
    ) -> None: ...

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None: ...

    def check_repository_control(self) -> None:
        """Refuse model control outside explicit model-control mode."""
        ...
