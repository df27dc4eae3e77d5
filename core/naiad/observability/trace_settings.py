"""Triton's trace extension settings: `TraceSetting`, the typed settings of one scope, and
`TraceSettings`, the global settings with per-model overrides that clients read and change.

Clients speak Triton's JSON form (`trace_level` ["OFF"] | ["TIMESTAMPS"] | ["TENSORS"] |
both, `trace_rate`, `trace_count`, `log_frequency`, `trace_file`, `trace_mode`; numbers as
strings, as the extension reports them): `get` and `update` take and give that form, served
at `/v2/trace/setting`, `/v2/models/{name}/trace/setting` and the `TraceSetting` RPC. Inside
naiad the values are typed and checked once, as they arrive.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import NaiadError, shown

if TYPE_CHECKING:
    from .otlp_export import OtlpExportSettings

__all__ = ["TRACE_KEYS", "TRACE_LEVELS", "TRACE_MODES", "TraceSetting", "TraceSettings", "trace_value"]

TRACE_LEVELS: Final = ("OFF", "TIMESTAMPS", "TENSORS")
TRACE_MODES: Final = ("triton", "opentelemetry")

# Triton's JSON keys -> the TraceSetting fields they set.
TRACE_KEYS: Final = {
    "trace_level": "level",
    "trace_rate": "rate",
    "trace_count": "count",
    "log_frequency": "log_frequency",
    "trace_file": "file",
    "trace_mode": "mode",
}
# The least each number may be: one request in `rate`; `count` -1 is "no limit".
_MINIMUM: Final = {"trace_rate": 1, "trace_count": -1, "log_frequency": 0}


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSetting:
    """The trace settings in force for one scope (the server, or a model)."""

    level: tuple[str, ...] = ("OFF",)
    # Trace one request in `rate`; at most `count` traces (-1: no limit).
    rate: int = 1000
    count: int = -1
    # triton mode writes `file.0`, `file.1`... every `log_frequency` traces; 0: `file` at stop.
    log_frequency: int = 0
    file: str = ""
    mode: str = "triton"

    @property
    def enabled(self) -> bool:
        return self.level != ("OFF",)

    def to_json(self) -> dict[str, Any]:
        """Triton's JSON form: the level a list, numbers as strings."""
        return {
            "trace_level": list(self.level),
            "trace_rate": str(self.rate),
            "trace_count": str(self.count),
            "log_frequency": str(self.log_frequency),
            "trace_file": self.file,
            "trace_mode": self.mode,
        }

    def check(self) -> None:
        """Refuses a combination that could not trace anything."""
        if self.mode == "triton" and self.enabled and not self.file:
            raise NaiadError.invalid(
                "tracing in triton mode writes to trace_file, which is set at start-up: start the server with "
                "--trace-config triton,file=PATH to enable tracing"
            )


def trace_value(key: str, value: Any) -> Any:
    """One setting from Triton's JSON form (a number may be a string) to its typed value;
    NaiadError naming the setting when it is not one."""
    if key == "trace_level":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise NaiadError.invalid(f"trace_level must be a list of OFF, TIMESTAMPS, TENSORS; got {shown(value)}")
        levels = [v.upper() for v in value]
        bad = [v for v in levels if v not in TRACE_LEVELS]
        if bad:
            raise NaiadError.invalid(f"trace_level: unknown level(s) {bad} (known: OFF, TIMESTAMPS, TENSORS)")
        if "OFF" in levels and len(levels) > 1:
            raise NaiadError.invalid(f"trace_level: OFF cannot be combined with other levels, got {levels}")
        return tuple(v for v in TRACE_LEVELS if v in levels)
    if key in _MINIMUM:
        text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        try:
            number = int(text) if text is not None else None
        except ValueError:
            number = None
        if number is None:
            raise NaiadError.invalid(f"{key} must be an integer (as a string), got {shown(value)}")
        if number < _MINIMUM[key]:
            raise NaiadError.invalid(f"{key} must be at least {_MINIMUM[key]}, got {number}")
        return number
    if key == "trace_file":
        if not isinstance(value, str):
            raise NaiadError.invalid(f"trace_file must be a string, got {shown(value)}")
        return value
    if key == "trace_mode":
        if value not in TRACE_MODES:
            raise NaiadError.invalid(f"trace_mode must be 'triton' or 'opentelemetry', got {shown(value)}")
        return value
    raise NaiadError.invalid(f"unknown trace setting '{key}' (known: {', '.join(TRACE_KEYS)})")


class TraceSettings:
    """Global trace settings plus per-model overrides, validated on every update. `export`
    is where opentelemetry mode sends its spans (set at start-up only)."""

    def __init__(self, startup: TraceSetting | None = None, export: OtlpExportSettings | None = None) -> None:
        self._lock = threading.Lock()
        # The start-up values (`--trace-config`): what a cleared global setting returns to.
        self._startup = startup or TraceSetting()
        self._startup.check()
        self._global = self._startup
        # Per model: the fields it overrides, typed.
        self._models: dict[str, dict[str, Any]] = {}
        self.export = export
        # Bumped on every change so `Tracing` can reset its sampling counters.
        self.generation = 0

    def current(self, model: str = "") -> TraceSetting:
        """The settings in force for `model` ("" for the global ones)."""
        with self._lock:
            return self._merged(model)

    def get(self, model: str = "") -> dict[str, Any]:
        """The settings in force for `model`, in Triton's JSON form."""
        return self.current(model).to_json()

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
            target = dict(self._models.get(model, {})) if model else {}
            scope = self._global
            for key, value in changes.items():
                if key not in TRACE_KEYS:
                    raise NaiadError.invalid(f"unknown trace setting '{key}' (known: {', '.join(TRACE_KEYS)})")
                field = TRACE_KEYS[key]
                if key != "trace_level" and isinstance(value, (list, tuple)):
                    # gRPC's TraceSetting sends every value as a list of strings; an empty
                    # list clears the setting, as null does over HTTP.
                    if len(value) > 1:
                        raise NaiadError.invalid(f"{key} takes one value, got {list(value)}")
                    value = value[0] if value else None
                elif key == "trace_level" and isinstance(value, (list, tuple)) and not value:
                    value = None
                if key == "trace_mode" and value is not None and value != self._global.mode:
                    raise NaiadError.invalid(
                        "trace_mode is chosen at start-up (--trace-config mode=...) and cannot be changed while serving"
                    )
                if value is None:
                    if model:
                        target.pop(field, None)
                    else:
                        scope = dataclasses.replace(scope, **{field: getattr(self._startup, field)})
                    continue
                if model:
                    target[field] = trace_value(key, value)
                else:
                    scope = dataclasses.replace(scope, **{field: trace_value(key, value)})
            merged = dataclasses.replace(self._global, **target) if model else scope
            merged.check()
            if model:
                if target:
                    self._models[model] = target
                else:
                    self._models.pop(model, None)
            else:
                self._global = scope
            self.generation += 1
            return merged.to_json()

    def has_override(self, model: str) -> bool:
        return model in self._models

    def any_enabled(self) -> bool:
        with self._lock:
            levels = [self._global.level] + [m["level"] for m in self._models.values() if "level" in m]
        return any(level != ("OFF",) for level in levels)

    def _merged(self, model: str) -> TraceSetting:
        overrides = self._models.get(model) if model else None
        return dataclasses.replace(self._global, **overrides) if overrides else self._global
