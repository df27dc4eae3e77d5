"""`Tracing`: which requests are traced, and where a finished trace goes.

Every `trace_rate`-th request is traced, at most `trace_count` of them (per model where a
model overrides the settings). A finished `RequestTrace` is written as JSON to `trace_file`
in `triton` mode (`TraceFiles`), or sent as spans through the OpenTelemetry SDK in
`opentelemetry` mode (`trace_spans`, `otlp_export`). While every level is OFF, `Tracing.active` is False
and the request path checks nothing else.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .otlp_export import otlp_tracer_provider
from .request_trace import RequestTrace
from .trace_files import TraceFiles
from .trace_settings import TraceSettings
from .trace_spans import export_spans

if TYPE_CHECKING:
    from ..inference import InferenceRequest

__all__ = ["Tracing"]

log = logging.getLogger("naiad.tracing")


class Tracing:
    """Samples requests into traces and exports them as the settings say."""

    def __init__(self, settings: TraceSettings | None = None, tracer_provider: Any = None) -> None:
        self.settings = settings or TraceSettings()
        # Any OpenTelemetry TracerProvider; None: the one the settings' OTLP export makes, or
        # else the globally configured one.
        self.tracer_provider = tracer_provider
        self.active = self.settings.any_enabled()
        self.files = TraceFiles()
        self._ids = itertools.count(1)
        self._seen: dict[str, int] = {}
        self._remaining: dict[str, int] = {}
        self._generation = self.settings.generation
        self._epoch_offset_ns = time.time_ns() - time.monotonic_ns()
        self._tracer: Any = None
        # The provider made from the settings' export, shut down (flushed) at close.
        self._own_provider: Any = None

    def update(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        """Change settings (the trace extension's POST) and re-arm sampling."""
        result = self.settings.update(changes, model)
        self.active = self.settings.any_enabled()
        return result

    async def change(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        """`update` as the frontends call it: where other processes must take the change too,
        they are waited for without holding the event loop."""
        return self.update(changes, model)

    def get(self, model: str = "") -> dict[str, Any]:
        return self.settings.get(model)

    def begin(
        self, request: InferenceRequest, model_name: str, model_version: str, protocol: str = ""
    ) -> RequestTrace | None:
        """A trace for this request if sampling picks it, else None. Frontends may call
        this before `Server.infer` (and then own the trace's end); the server calls it
        otherwise."""
        if not self.active:
            return None
        if self._generation != self.settings.generation:
            self._generation = self.settings.generation
            self._seen.clear()
            self._remaining.clear()
        settings = self.settings.current(model_name)
        if not settings.enabled:
            return None
        scope = model_name if self.settings.has_override(model_name) else ""
        seen = self._seen[scope] = self._seen.get(scope, 0) + 1
        if (seen - 1) % settings.rate:
            return None
        remaining = self._remaining.get(scope, settings.count)
        if remaining == 0:
            return None
        if remaining > 0:
            self._remaining[scope] = remaining - 1
        trace = RequestTrace(
            self._export,
            next(self._ids),
            model_name,
            model_version,
            request.id,
            settings,
            protocol,
            owned_by_frontend=bool(protocol),
        )
        trace.mark("REQUEST_START")
        trace.record_tensors("TENSOR_QUEUE_INPUT", request.inputs)
        request.trace = trace
        return trace

    def close(self) -> None:
        """At server stop: write what the triton-mode files still hold, send the spans the
        OTLP exporter still holds."""
        self.files.close()
        if self._own_provider is not None:
            self._own_provider.shutdown()
            self._own_provider = None
            self._tracer = None

    def _export(self, trace: RequestTrace) -> None:
        try:
            if trace.settings.mode == "opentelemetry":
                tracer = self._otel_tracer()
                if tracer is not None:
                    export_spans(tracer, trace, self._epoch_offset_ns)
            elif trace.settings.file:
                self.files.add(trace.settings.file, trace.to_json(), trace.settings.log_frequency)
        except Exception:  # noqa: BLE001 - a broken exporter must not fail requests
            log.exception("could not export trace %d", trace.id)

    def _otel_tracer(self) -> Any:
        if self._tracer is None:
            try:
                from opentelemetry import trace as otel  # type: ignore[import-not-found]
            except ImportError:
                log.warning("trace_mode is opentelemetry but the opentelemetry package is not installed")
                self._tracer = False
                return None
            provider = self.tracer_provider
            if provider is None and self.settings.export is not None:
                provider = self._own_provider = otlp_tracer_provider(self.settings.export)
            self._tracer = (provider or otel.get_tracer_provider()).get_tracer("naiad")
        return self._tracer or None
