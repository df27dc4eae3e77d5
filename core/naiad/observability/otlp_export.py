"""opentelemetry trace mode: where spans go (`OtlpExportSettings`, from `--trace-config
opentelemetry,KEY=VALUE`) and the tracer provider that sends them there.

The batch span processor settings are tritonserver's (`bsp_max_queue_size`,
`bsp_schedule_delay` in milliseconds, `bsp_max_export_batch_size`), with the OpenTelemetry
SDK's defaults; they configure the processor that sends spans to the collector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..errors import NaiadError

__all__ = ["OTLP_KEYS", "OtlpExportSettings", "otlp_tracer_provider"]

# The `--trace-config opentelemetry,KEY=VALUE` keys these settings take.
OTLP_KEYS: Final = ("url", "resource", "bsp_max_queue_size", "bsp_schedule_delay", "bsp_max_export_batch_size")


@dataclass(frozen=True, slots=True, kw_only=True)
class OtlpExportSettings:
    """An OTLP/HTTP collector and the batch span processor that feeds it."""

    url: str = ""
    # Resource attributes, beside service.name=naiad (which one named service.name replaces).
    resource: tuple[tuple[str, str], ...] = ()
    bsp_max_queue_size: int = 2048
    # Milliseconds between exports of what the queue holds.
    bsp_schedule_delay: int = 5000
    bsp_max_export_batch_size: int = 512

    def __post_init__(self) -> None:
        for name in ("bsp_max_queue_size", "bsp_schedule_delay", "bsp_max_export_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise NaiadError.invalid(f"opentelemetry,{name} must be a positive integer, got {value!r}")
        if self.bsp_max_export_batch_size > self.bsp_max_queue_size:
            raise NaiadError.invalid(
                f"opentelemetry,bsp_max_export_batch_size ({self.bsp_max_export_batch_size}) must not exceed "
                f"opentelemetry,bsp_max_queue_size ({self.bsp_max_queue_size})"
            )

    @classmethod
    def from_config(cls, values: dict[str, list[str]]) -> OtlpExportSettings:
        """From the `opentelemetry,KEY=VALUE` items by key (a key given twice: the last
        value; `resource` items add up)."""
        numbers: dict[str, int] = {}
        for name in ("bsp_max_queue_size", "bsp_schedule_delay", "bsp_max_export_batch_size"):
            if name in values:
                text = values[name][-1]
                try:
                    numbers[name] = int(text)
                except ValueError:
                    raise NaiadError.invalid(f"opentelemetry,{name} must be a positive integer, got '{text}'") from None
        resource = []
        for item in values.get("resource", []):
            for pair in filter(None, item.split(",")):
                key, sep, value = pair.partition("=")
                if not sep or not key:
                    raise NaiadError.invalid(f"opentelemetry,resource: expected KEY=VALUE, got '{pair}'")
                resource.append((key, value))
        return cls(url=values.get("url", [""])[-1], resource=tuple(resource), **numbers)


def otlp_tracer_provider(settings: OtlpExportSettings, exporter: Any = None) -> Any:
    """A TracerProvider whose batch span processor, configured by `settings`, exports to
    `exporter` (default: OTLP/HTTP to `settings.url`); None (with a warning) when the
    OpenTelemetry SDK or its OTLP exporter is not installed."""
    import logging

    try:
        from opentelemetry.sdk.resources import Resource  # type: ignore[import-not-found]
        from opentelemetry.sdk.trace import TracerProvider  # type: ignore[import-not-found]
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # type: ignore[import-not-found]

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found]
                OTLPSpanExporter,
            )

            exporter = OTLPSpanExporter(endpoint=settings.url)
    except ImportError as exc:
        logging.getLogger("naiad.tracing").warning(
            "OpenTelemetry export needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http: %s", exc
        )
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": "naiad", **dict(settings.resource)}))
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter,
            max_queue_size=settings.bsp_max_queue_size,
            schedule_delay_millis=settings.bsp_schedule_delay,
            max_export_batch_size=settings.bsp_max_export_batch_size,
        )
    )
    return provider
