"""Custom metrics for `model.py`: Triton's `pb_utils.MetricFamily` and `pb_utils.Metric`.

A model creates a family (name, description, kind) and labelled metrics in it, and updates
them; the server exports them on its metrics endpoint beside its own families. Everything
that can be checked here (the kind of operation, the value, the labels' types) is checked
here, so a wrong call raises `TritonModelException` in the model at once. What only the
server can judge (name clashes, Prometheus naming rules, bucket order) comes back from
creating the family or metric, which waits for the server's answer. Updates need no answer:
in process mode they travel without a round trip, in order, and `value()` (a round trip)
sees every update the model made before it.

Lifetimes follow Triton: a family keeps its metrics; when the family object is deleted,
its metrics leave the endpoint and using them raises; when the model unloads, everything
it created goes.
"""

from __future__ import annotations

import enum
import itertools
import numbers
import threading
from typing import Any

from .bridge import Bridge, current_bridge
from .errors import TritonModelException, text_argument

__all__ = ["MetricKind", "MetricFamily", "Metric", "COUNTER", "GAUGE", "HISTOGRAM"]

# Handles name families and metrics between the model and the server; unique per process.
_handles = itertools.count(1)
_handles_lock = threading.Lock()


def _new_handle() -> int:
    with _handles_lock:
        return next(_handles)


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


# Triton's module also exports the kinds at top level (pb_utils.COUNTER, ...).
COUNTER = MetricKind.COUNTER
GAUGE = MetricKind.GAUGE
HISTOGRAM = MetricKind.HISTOGRAM


def _text(value: Any, what: str) -> Any:
    """bytes as Triton's binding takes them (UTF-8 text); anything else for the checks below."""
    if not isinstance(value, (bytes, bytearray)):
        return value
    return text_argument(value, what)


class _FamilyState:
    """What a family's metrics need to know about it, without keeping it alive."""

    __slots__ = ("name", "kind", "handle", "deleted")

    def __init__(self, name: str, kind: MetricKind, handle: int) -> None:
        self.name = name
        self.kind = kind
        self.handle = handle
        self.deleted = False


class MetricFamily:
    """``pb_utils.MetricFamily(name, description, kind)`` with kind
    `MetricFamily.COUNTER`, `MetricFamily.GAUGE` or `MetricFamily.HISTOGRAM`."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        name, description = _text(name, "MetricFamily name"), _text(description, "MetricFamily description")
        if not isinstance(name, str) or not name:
            raise TritonModelException(
                f"Error when creating MetricFamily: name must be a non-empty string, got {name!r}"
            )
        if not isinstance(description, str):
            raise TritonModelException(
                f"Error when creating MetricFamily '{name}': description must be a string, "
                f"got {type(description).__name__}"
            )
        if isinstance(kind, bool) or kind not in tuple(MetricKind):
            raise TritonModelException(
                f"Error when creating MetricFamily '{name}': kind must be MetricFamily.COUNTER, "
                f"MetricFamily.GAUGE or MetricFamily.HISTOGRAM, got {kind!r}"
            )
        bridge = current_bridge()
        if bridge is None:
            raise TritonModelException(
                f"Error when creating MetricFamily '{name}': metrics can only be created while "
                "the model is loaded (in initialize, execute or finalize)"
            )
        self._state = _FamilyState(name, MetricKind(kind), _new_handle())
        self._description = description
        self._metrics: list[Metric] = []
        self._bridge: Bridge | None = None
        try:
            bridge.metric_family_new(self._state.handle, name, description, self._state.kind.name.lower())
        except Exception as exc:  # noqa: BLE001 - the server's reason, as the model's error
            raise TritonModelException(f"Error when creating MetricFamily '{name}': {exc}") from None
        self._bridge = bridge  # set only once created: __del__ then knows there is something to delete

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def kind(self) -> MetricKind:
        return self._state.kind

    def Metric(self, labels: dict[str, str] | None = None, buckets: list[float] | None = None) -> Metric:  # noqa: N802 - Triton's name
        """A metric of this family with these labels (histograms: and bucket boundaries)."""
        name, kind = self._state.name, self._state.kind
        if labels is None:
            labels = {}
        if not isinstance(labels, dict):
            raise TritonModelException(
                f"Failed to create metric of family '{name}': labels must be a dictionary, got {type(labels).__name__}"
            )
        labels = {_text(key, "metric label name"): _text(value, "metric label value") for key, value in labels.items()}
        for key, value in labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TritonModelException(
                    f"Failed to create metric of family '{name}': label names and values must be "
                    f"strings, got {key!r}: {value!r}"
                )
        bounds: list[float] | None = None
        if buckets is not None:
            if kind is not MetricKind.HISTOGRAM:
                raise TritonModelException(
                    f"Failed to create metric of family '{name}': buckets are for histograms, "
                    f"this family is a {kind.name.lower()}"
                )
            if not isinstance(buckets, (list, tuple)) or not all(_is_number(b) for b in buckets):
                raise TritonModelException(
                    f"Failed to create metric of family '{name}': buckets must be a list of numbers, got {buckets!r}"
                )
            bounds = [float(b) for b in buckets]
        elif kind is MetricKind.HISTOGRAM:
            raise TritonModelException(f"Failed to create metric of family '{name}': a histogram metric needs buckets")
        if self._state.deleted or self._bridge is None:
            raise TritonModelException(f"Failed to create metric of family '{name}': the family has been deleted")
        metric = Metric._create(self._state, self._bridge, dict(labels), bounds)
        self._metrics.append(metric)
        return metric

    def __del__(self) -> None:
        bridge = getattr(self, "_bridge", None)
        if bridge is None:
            return
        self._state.deleted = True
        try:
            # The server drops the family's metrics with it.
            bridge.metric_family_delete(self._state.handle)
        except Exception:  # noqa: BLE001 - the server may be gone (model unloading)
            pass

    def __repr__(self) -> str:
        return f"MetricFamily({self._state.name!r}, {self._state.kind.name})"


class Metric:
    """One labelled series of a family; made by `MetricFamily.Metric(...)`.

    Counters: `increment(value >= 0)`, `value()`. Gauges: `increment(value)` (any sign),
    `set(value)`, `value()`. Histograms: `observe(value)`.
    """

    _state: _FamilyState
    _bridge: Bridge
    _handle: int
    _labels: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("pb_utils.Metric cannot be created directly: use MetricFamily(...).Metric(labels)")

    @classmethod
    def _create(
        cls, state: _FamilyState, bridge: Bridge, labels: dict[str, str], buckets: list[float] | None
    ) -> Metric:
        metric = cls.__new__(cls)
        metric._state = state
        metric._bridge = bridge
        metric._handle = _new_handle()
        metric._labels = labels
        try:
            bridge.metric_new(metric._handle, state.handle, labels, buckets)
        except Exception as exc:  # noqa: BLE001
            raise TritonModelException(
                f"Failed to create metric of family '{state.name}' with labels {labels}: {exc}"
            ) from None
        return metric

    def _check(self, operation: str, value: Any, allowed: tuple[MetricKind, ...]) -> float:
        state = self._state
        if state.deleted:
            raise TritonModelException(
                f"Invalid metric operation {operation}() on '{state.name}': its MetricFamily has been "
                "deleted. Keep the MetricFamily object alive as long as its metrics are used."
            )
        if state.kind not in allowed:
            action = "get the value of" if operation == "value" else operation
            raise TritonModelException(
                f"Failed to {action} metric '{state.name}': a {state.kind.name.lower()} does not support {operation}()"
            )
        if operation == "value":
            return 0.0
        if not _is_number(value):
            raise TritonModelException(
                f"Failed to {operation} metric '{state.name}': the value must be a number, got {value!r}"
            )
        return float(value)

    def increment(self, value: float) -> None:
        number = self._check("increment", value, (MetricKind.COUNTER, MetricKind.GAUGE))
        if self._state.kind is MetricKind.COUNTER and number < 0:
            raise TritonModelException(
                f"Failed to increment metric '{self._state.name}': a counter can only be incremented "
                f"by non-negative values, got {number}"
            )
        self._bridge.metric_update(self._handle, "increment", number)

    def set(self, value: float) -> None:
        number = self._check("set", value, (MetricKind.GAUGE,))
        self._bridge.metric_update(self._handle, "set", number)

    def observe(self, value: float) -> None:
        number = self._check("observe", value, (MetricKind.HISTOGRAM,))
        self._bridge.metric_update(self._handle, "observe", number)

    def value(self) -> float:
        """The current value of a counter or gauge (histograms have none, as in Triton)."""
        self._check("value", None, (MetricKind.COUNTER, MetricKind.GAUGE))
        try:
            return self._bridge.metric_value(self._handle)
        except Exception as exc:  # noqa: BLE001
            raise TritonModelException(f"Failed to get the value of metric '{self._state.name}': {exc}") from None

    def __repr__(self) -> str:
        return f"Metric({self._state.name!r}, {self._labels})"


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
