"""Request tracing: Triton's trace extension settings and the traces they produce.

`TraceSettings` holds the global settings and per-model overrides with Triton's JSON keys
(`trace_level` ["OFF"] | ["TIMESTAMPS"] | ["TENSORS"] | both, `trace_rate`, `trace_count`,
`log_frequency`, `trace_file`, `trace_mode`), values as strings the way the extension
reports them. The HTTP frontend serves them at `/v2/trace/setting` and
`/v2/models/{name}/trace/setting`, the gRPC frontend through the `TraceSetting` RPC.

`Tracing` decides which requests are traced (every `trace_rate`-th, at most `trace_count`)
and exports a finished `RequestTrace`: in `triton` mode as JSON written to `trace_file`,
in `opentelemetry` mode as spans (`InferRequest` with `queue` and `compute` children)
through the OpenTelemetry SDK when it is installed. While every level is OFF,
`Tracing.active` is False and the request path checks nothing else.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NaiadError, shown

if TYPE_CHECKING:
    from ..inference import InferenceRequest, InferenceResponse

__all__ = [
    "TraceSettings",
    "Tracing",
    "RequestTrace",
    "TRACE_LEVELS",
    "TRACE_MODES",
    "trace_settings_from_config",
    "otlp_tracer_provider",
]

log = logging.getLogger("naiad.tracing")

TRACE_LEVELS = ("OFF", "TIMESTAMPS", "TENSORS")
TRACE_MODES = ("triton", "opentelemetry")
_KEYS = ("trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file", "trace_mode")
_DEFAULTS: dict[str, Any] = {
    "trace_level": ["OFF"],
    "trace_rate": "1000",
    "trace_count": "-1",
    "log_frequency": "0",
    "trace_file": "",
    "trace_mode": "triton",
}


class TraceSettings:
    """Global trace settings plus per-model overrides, validated on every update."""

    def __init__(self, **initial: Any) -> None:
        self._lock = threading.Lock()
        # The start-up values (`--trace-config`): what a cleared global setting returns to.
        self._startup = dict(_DEFAULTS)
        for key, value in initial.items():
            self._startup[key] = _validate(key, value)
        _check_combination(self._startup)
        self._global = dict(self._startup)
        self._models: dict[str, dict[str, Any]] = {}
        # Bumped on every change so `Tracing` can reset its sampling counters.
        self.generation = 0

    def get(self, model: str = "") -> dict[str, Any]:
        """The settings that apply to `model` ("" for the global ones)."""
        with self._lock:
            merged = dict(self._global)
            merged.update(self._models.get(model, {}) if model else {})
            merged["trace_level"] = list(merged["trace_level"])
            return merged

    def update(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        """Apply `changes` (the trace extension's update, from a client) all or nothing and
        return the settings now in force. For a model, a null value drops that model's
        override (back to the global value); for the global settings a null value restores
        the start-up value. `trace_file` names a file on the server: like Triton, only the
        command line sets it."""
        if not isinstance(changes, Mapping):
            raise NaiadError.invalid(f"trace settings must be a JSON object, got {type(changes).__name__}")
        if "trace_file" in changes:
            raise NaiadError.unsupported(
                "trace file location can not be updated through network protocol "
                "(set it at start-up: --trace-config triton,file=PATH)"
            )
        with self._lock:
            target = dict(self._models.get(model, {})) if model else dict(self._global)
            for key, value in changes.items():
                if key not in _KEYS:
                    raise NaiadError.invalid(f"unknown trace setting '{key}' (known: {', '.join(_KEYS)})")
                if key != "trace_level" and isinstance(value, (list, tuple)):
                    # gRPC's TraceSetting sends every value as a list of strings; an empty
                    # list clears the setting, as null does over HTTP.
                    if len(value) > 1:
                        raise NaiadError.invalid(f"{key} takes one value, got {list(value)}")
                    value = value[0] if value else None
                elif key == "trace_level" and isinstance(value, (list, tuple)) and not value:
                    value = None
                if key == "trace_mode" and value is not None and value != self._global["trace_mode"]:
                    raise NaiadError.invalid(
                        "trace_mode is chosen at start-up (--trace-config mode=...) and cannot be changed while serving"
                    )
                if value is None:
                    if model:
                        target.pop(key, None)
                    else:
                        target[key] = self._startup[key]
                    continue
                target[key] = _validate(key, value)
            merged = {**self._global, **target} if model else target
            _check_combination(merged)
            if model:
                if target:
                    self._models[model] = target
                else:
                    self._models.pop(model, None)
            else:
                self._global = target
            self.generation += 1
        return self.get(model)

    def has_override(self, model: str) -> bool:
        return model in self._models

    def any_enabled(self) -> bool:
        with self._lock:
            levels = [self._global["trace_level"]] + [
                m["trace_level"] for m in self._models.values() if "trace_level" in m
            ]
        return any(level != ["OFF"] for level in levels)


def _validate(key: str, value: Any) -> Any:
    if key == "trace_level":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise NaiadError.invalid(f"trace_level must be a list of OFF, TIMESTAMPS, TENSORS; got {shown(value)}")
        levels = [v.upper() for v in value]
        bad = [v for v in levels if v not in TRACE_LEVELS]
        if bad:
            raise NaiadError.invalid(f"trace_level: unknown level(s) {bad} (known: OFF, TIMESTAMPS, TENSORS)")
        if "OFF" in levels and len(levels) > 1:
            raise NaiadError.invalid(f"trace_level: OFF cannot be combined with other levels, got {levels}")
        return [v for v in TRACE_LEVELS if v in levels]
    if key in ("trace_rate", "trace_count", "log_frequency"):
        text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        try:
            number = int(text) if text is not None else None
        except ValueError:
            number = None
        if number is None:
            raise NaiadError.invalid(f"{key} must be an integer (as a string), got {shown(value)}")
        minimum = {"trace_rate": 1, "trace_count": -1, "log_frequency": 0}[key]
        if number < minimum:
            raise NaiadError.invalid(f"{key} must be at least {minimum}, got {number}")
        return str(number)
    if key == "trace_file":
        if not isinstance(value, str):
            raise NaiadError.invalid(f"trace_file must be a string, got {shown(value)}")
        return value
    if key == "trace_mode":
        if value not in TRACE_MODES:
            raise NaiadError.invalid(f"trace_mode must be 'triton' or 'opentelemetry', got {shown(value)}")
        return value
    raise NaiadError.invalid(f"unknown trace setting '{key}'")


def _check_combination(settings: Mapping[str, Any]) -> None:
    if settings["trace_mode"] == "triton" and settings["trace_level"] != ["OFF"] and not settings["trace_file"]:
        raise NaiadError.invalid(
            "tracing in triton mode writes to trace_file, which is set at start-up: start the server with "
            "--trace-config triton,file=PATH to enable tracing"
        )


@dataclass(eq=False)
class RequestTrace:
    """The timeline of one traced request. Timestamps are `time.monotonic_ns()` values,
    named as Triton names them (REQUEST_START, QUEUE_START, COMPUTE_START, COMPUTE_END,
    REQUEST_END; frontends add HTTP_RECV_START, GRPC_SEND_END...)."""

    tracing: Tracing
    id: int
    model_name: str
    model_version: str
    request_id: str
    settings: dict[str, Any]
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

    def record_tensors(self, activity: str, tensors: list[Any]) -> None:
        if "TENSORS" not in self.settings["trace_level"]:
            return
        for tensor in tensors:
            data = tensor.data
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
            self.tracing._export(self)

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


class Tracing:
    """Samples requests into traces and exports them as the settings say."""

    def __init__(self, settings: TraceSettings | None = None, tracer_provider: Any = None) -> None:
        self.settings = settings or TraceSettings()
        # Any OpenTelemetry TracerProvider; None uses the globally configured one.
        self.tracer_provider = tracer_provider
        self.active = self.settings.any_enabled()
        self._ids = itertools.count(1)
        self._seen: dict[str, int] = {}
        self._remaining: dict[str, int] = {}
        self._generation = self.settings.generation
        self._pending_files: dict[str, list[dict[str, Any]]] = {}
        self._file_index: dict[str, int] = {}
        self._written: set[str] = set()
        self._epoch_offset_ns = time.time_ns() - time.monotonic_ns()
        self._tracer: Any = None

    def update(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        """Change settings (the trace extension's POST) and re-arm sampling."""
        result = self.settings.update(changes, model)
        self.active = self.settings.any_enabled()
        return result

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
        settings = self.settings.get(model_name)
        if settings["trace_level"] == ["OFF"]:
            return None
        scope = model_name if self.settings.has_override(model_name) else ""
        seen = self._seen[scope] = self._seen.get(scope, 0) + 1
        if (seen - 1) % int(settings["trace_rate"]):
            return None
        remaining = self._remaining.get(scope, int(settings["trace_count"]))
        if remaining == 0:
            return None
        if remaining > 0:
            self._remaining[scope] = remaining - 1
        trace = RequestTrace(
            self,
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
        """Write what the triton-mode file writer still holds (at server stop)."""
        for path in list(self._pending_files):
            self._flush(path, final=True)

    # -- exporting -----------------------------------------------------------------------

    def _export(self, trace: RequestTrace) -> None:
        try:
            if trace.settings["trace_mode"] == "opentelemetry":
                self._export_spans(trace)
            else:
                self._export_json(trace)
        except Exception:  # noqa: BLE001 - a broken exporter must not fail requests
            log.exception("could not export trace %d", trace.id)

    def _export_json(self, trace: RequestTrace) -> None:
        path = trace.settings["trace_file"]
        if path:
            self.add_file_entry(path, trace.to_json(), int(trace.settings["log_frequency"]))

    def add_file_entry(self, path: str, entry: dict[str, Any], frequency: int) -> None:
        """Queue one trace for `path`; write a file every `frequency` traces (0: at close)."""
        pending = self._pending_files.setdefault(path, [])
        pending.append(entry)
        if frequency and len(pending) >= frequency:
            self._flush(path, final=False)

    def _flush(self, path: str, final: bool) -> None:
        """log_frequency > 0 writes `trace_file.N` files of that many traces each; 0
        writes one `trace_file` when the server stops."""
        entries = self._pending_files.pop(path, [])
        if not entries and not final:
            return
        if final and not entries:
            return
        if final and path not in self._file_index:
            target = path
        else:
            index = self._file_index.get(path, 0)
            self._file_index[path] = index + 1
            target = f"{path}.{index}"
        with open(target, "w", encoding="utf-8") as f:
            json.dump(entries, f, indent=1)
        self._written.add(target)

    def _export_spans(self, trace: RequestTrace) -> None:
        tracer = self._otel_tracer()
        if tracer is None:
            return
        from opentelemetry import trace as otel  # type: ignore[import-not-found]

        stamps = dict(trace.timestamps)
        to_epoch = self._epoch_offset_ns
        start = min(ns for _, ns in trace.timestamps) + to_epoch
        end = max(ns for _, ns in trace.timestamps) + to_epoch
        root = tracer.start_span(
            "InferRequest",
            start_time=start,
            attributes={
                "triton.model_name": trace.model_name,
                "triton.model_version": trace.model_version,
                "triton.trace_id": trace.id,
                "triton.request_id": trace.request_id,
                **({"naiad.protocol": trace.protocol} if trace.protocol else {}),
            },
        )
        for name, ns in sorted(trace.timestamps, key=lambda t: t[1]):
            root.add_event(name, timestamp=ns + to_epoch)
        context = otel.set_span_in_context(root)
        if "QUEUE_START" in stamps and "COMPUTE_START" in stamps:
            queue = tracer.start_span("queue", context=context, start_time=stamps["QUEUE_START"] + to_epoch)
            queue.end(end_time=stamps["COMPUTE_START"] + to_epoch)
        if "COMPUTE_START" in stamps and "COMPUTE_END" in stamps:
            compute = tracer.start_span("compute", context=context, start_time=stamps["COMPUTE_START"] + to_epoch)
            compute.end(end_time=stamps["COMPUTE_END"] + to_epoch)
        root.end(end_time=end)

    def _otel_tracer(self) -> Any:
        if self._tracer is None:
            try:
                from opentelemetry import trace as otel  # type: ignore[import-not-found]
            except ImportError:
                log.warning("trace_mode is opentelemetry but the opentelemetry package is not installed")
                self._tracer = False
                return None
            provider = self.tracer_provider or otel.get_tracer_provider()
            self._tracer = provider.get_tracer("naiad")
        return self._tracer or None


# `--trace-config` keys (tritonserver's) and the settings keys they set.
_CONFIG_KEYS = {
    "level": "trace_level",
    "rate": "trace_rate",
    "count": "trace_count",
    "log_frequency": "log_frequency",
    "file": "trace_file",
    "mode": "trace_mode",
}


def trace_settings_from_config(items: list[str]) -> tuple[TraceSettings, dict[str, str]]:
    """Parse `--trace-config [MODE,]KEY=VALUE` items. Returns the settings and the
    OpenTelemetry exporter options (`url`, `resource`) given as `opentelemetry,KEY=VALUE`."""
    values: dict[str, Any] = {}
    otel: dict[str, str] = {}
    for item in items:
        scope, _, setting = item.rpartition(",")
        key, sep, value = setting.partition("=")
        if not sep:
            raise NaiadError.invalid(f"--trace-config: expected [MODE,]KEY=VALUE, got '{item}'")
        if scope and scope not in TRACE_MODES:
            raise NaiadError.invalid(f"--trace-config: unknown mode '{scope}' in '{item}' (triton or opentelemetry)")
        if scope == "opentelemetry" and key in (
            "url",
            "resource",
            "bsp_max_queue_size",
            "bsp_schedule_delay",
            "bsp_max_export_batch_size",
        ):
            otel[key] = value if key != "resource" else ",".join(filter(None, [otel.get("resource"), value]))
            continue
        if key not in _CONFIG_KEYS:
            raise NaiadError.invalid(
                f"--trace-config: unknown setting '{key}' (known: {', '.join(_CONFIG_KEYS)}, opentelemetry,url)"
            )
        if key == "level":
            levels = values.setdefault("trace_level", [])
            if value.upper() != "OFF":
                levels.append(value)
            continue
        values[_CONFIG_KEYS[key]] = value
    if "trace_level" in values and not values["trace_level"]:
        values["trace_level"] = ["OFF"]
    try:
        settings = TraceSettings(**values)
    except NaiadError as exc:
        raise NaiadError.invalid(f"--trace-config: {exc.message}") from None
    return settings, otel


def otlp_tracer_provider(options: dict[str, str]) -> Any:
    """A TracerProvider exporting over OTLP/HTTP to `options['url']`, or None (with a
    warning) when the OpenTelemetry SDK or its OTLP exporter is not installed."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found]
            OTLPSpanExporter,
        )
        from opentelemetry.sdk.resources import Resource  # type: ignore[import-not-found]
        from opentelemetry.sdk.trace import TracerProvider  # type: ignore[import-not-found]
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # type: ignore[import-not-found]
    except ImportError as exc:
        log.warning("OpenTelemetry export needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http: %s", exc)
        return None
    attributes = {"service.name": "naiad"}
    for pair in filter(None, options.get("resource", "").split(",")):
        key, _, value = pair.partition("=")
        attributes[key] = value
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=options["url"])))
    return provider
