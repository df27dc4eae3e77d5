"""`--trace-config [MODE,]KEY=VALUE`, tritonserver's trace flag, read once into the
`TraceSettings` the server starts with (and, in opentelemetry mode, where spans go)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from ..errors import NaiadError
from .otlp_export import OTLP_KEYS, OtlpExportSettings
from .trace_settings import TRACE_KEYS, TRACE_MODES, TraceSetting, TraceSettings, trace_value

__all__ = ["trace_settings_from_config"]

# `--trace-config` keys (tritonserver's) and the extension's keys they set.
_CONFIG_KEYS: Final = {
    "level": "trace_level",
    "rate": "trace_rate",
    "count": "trace_count",
    "log_frequency": "log_frequency",
    "file": "trace_file",
    "mode": "trace_mode",
}


def trace_settings_from_config(items: Iterable[str]) -> TraceSettings:
    """The settings `--trace-config` items give; NaiadError naming the item or setting that
    is wrong."""
    values: dict[str, Any] = {}
    levels: list[str] | None = None
    otlp: dict[str, list[str]] = {}
    try:
        for item in items:
            scope, _, setting = item.rpartition(",")
            key, sep, value = setting.partition("=")
            if not sep:
                raise NaiadError.invalid(f"expected [MODE,]KEY=VALUE, got '{item}'")
            if scope and scope not in TRACE_MODES:
                raise NaiadError.invalid(f"unknown mode '{scope}' in '{item}' (triton or opentelemetry)")
            if scope == "opentelemetry" and key in OTLP_KEYS:
                otlp.setdefault(key, []).append(value)
                continue
            if key not in _CONFIG_KEYS:
                raise NaiadError.invalid(
                    f"unknown setting '{key}' (known: {', '.join(_CONFIG_KEYS)}, "
                    f"opentelemetry,{', opentelemetry,'.join(OTLP_KEYS)})"
                )
            if key == "level":
                levels = levels or []
                if value.upper() != "OFF":
                    levels.append(value)
                continue
            values[TRACE_KEYS[_CONFIG_KEYS[key]]] = trace_value(_CONFIG_KEYS[key], value)
        if levels is not None:
            values["level"] = trace_value("trace_level", levels or ["OFF"])
        export = OtlpExportSettings.from_config(otlp) if otlp.get("url") else None
        if otlp and export is None:
            named = ", ".join(f"opentelemetry,{key}" for key in sorted(otlp))
            raise NaiadError.invalid(
                f"{named} configure the exporter that opentelemetry,url=URL starts; set the collector's url too"
            )
        return TraceSettings(TraceSetting(**values), export)
    except NaiadError as exc:
        raise NaiadError.invalid(f"--trace-config: {exc.message}") from None
