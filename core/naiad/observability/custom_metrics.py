"""Metric families that models define and update themselves (Triton's custom metrics).

The server owns one `CustomMetricRegistry` (`server.custom_metrics`); backends create
families in it and the metrics frontend exports every family at scrape time. The Python
backend binds `pb_utils.MetricFamily` / `pb_utils.Metric` to these classes::

    family = server.custom_metrics.family("requests_seen", "requests my model saw", MetricKind.COUNTER)
    metric = family.metric({"model": "add_sub", "version": "1"})
    metric.increment(1)

Models update metrics from their own threads, so every operation holds the registry lock.

`acquire_family` / `acquire_metric` count their users, and `release_*` removes a family or
series when its last user lets go: two instances of one model share a series, as in
Triton, and a model's series leave the endpoint when it unloads. (Plain `family()` /
`metric()` results are kept until removed explicitly.)
"""

from __future__ import annotations

import bisect
import enum
import math
import re
import threading
from collections.abc import Mapping, Sequence

from ..errors import NaiadError

__all__ = ["MetricKind", "CustomMetricRegistry", "CustomMetricFamily", "CustomMetric"]

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class MetricKind(enum.Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class CustomMetric:
    """One labelled series of a family. Counters only go up; gauges are set or moved;
    histograms observe values into the buckets given when the metric was created."""

    def __init__(self, family: CustomMetricFamily, labels: dict[str, str], buckets: tuple[float, ...]) -> None:
        self.family = family
        self.labels = labels
        self.buckets = buckets
        self._lock = family._lock
        self._value = 0.0
        self._count = 0
        self._bucket_counts = [0] * (len(buckets) + 1)
        self.removed = False
        self._holders = 0  # acquire_metric calls not yet released
        self._kept = False  # obtained through plain metric(): never removed by a release

    @property
    def kind(self) -> MetricKind:
        return self.family.kind

    def increment(self, value: float) -> None:
        """Add `value` (counter: not negative; gauge: any sign)."""
        value = _number(value, "increment")
        if self.kind is MetricKind.HISTOGRAM:
            raise NaiadError.invalid(f"metric '{self.family.name}' is a histogram: use observe(), not increment()")
        if self.kind is MetricKind.COUNTER and value < 0:
            raise NaiadError.invalid(
                f"counter '{self.family.name}' cannot be incremented by a negative value ({value})"
            )
        with self._lock:
            self._value += value

    def set(self, value: float) -> None:
        """Set a gauge's value."""
        value = _number(value, "set")
        if self.kind is not MetricKind.GAUGE:
            raise NaiadError.invalid(f"metric '{self.family.name}' is a {self.kind.value}: only gauges can be set")
        with self._lock:
            self._value = value

    def observe(self, value: float) -> None:
        """Count `value` into a histogram's buckets."""
        value = _number(value, "observe")
        if self.kind is not MetricKind.HISTOGRAM:
            raise NaiadError.invalid(f"metric '{self.family.name}' is a {self.kind.value}: only histograms observe")
        with self._lock:
            self._count += 1
            self._value += value
            self._bucket_counts[bisect.bisect_left(self.buckets, value)] += 1

    def value(self) -> float:
        """A counter's or gauge's current value. Histograms have none (as in Triton): read
        `snapshot()` for their sum, count and buckets."""
        if self.kind is MetricKind.HISTOGRAM:
            raise NaiadError.unsupported(f"metric '{self.family.name}' is a histogram: it has no single value()")
        with self._lock:
            return self._value

    def snapshot(self) -> tuple[float, int, list[tuple[float, int]]]:
        """(value or sum, count, cumulative buckets ending with +Inf), read atomically."""
        with self._lock:
            running, cumulative = 0, []
            for bound, n in zip((*self.buckets, math.inf), self._bucket_counts):
                running += n
                cumulative.append((bound, running))
            return self._value, self._count, cumulative


class CustomMetricFamily:
    def __init__(self, registry: CustomMetricRegistry, name: str, description: str, kind: MetricKind) -> None:
        self.registry = registry
        self.name = name
        self.description = description
        self.kind = kind
        self._lock = registry._lock
        self._metrics: dict[tuple[tuple[str, str], ...], CustomMetric] = {}
        self._holders = 0
        self._kept = False

    def metric(self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None) -> CustomMetric:
        """The series with these labels, created on first use (the same object after)."""
        with self._lock:
            metric = self._metric(labels, buckets)
            metric._kept = True
            return metric

    def acquire_metric(
        self, labels: Mapping[str, str] | None = None, buckets: Sequence[float] | None = None
    ) -> CustomMetric:
        """`metric()`, counted: the series stays until every acquire is released."""
        with self._lock:
            metric = self._metric(labels, buckets)
            metric._holders += 1
            return metric

    def release_metric(self, metric: CustomMetric) -> None:
        """Undo one `acquire_metric`; the last release removes the series."""
        with self._lock:
            metric._holders -= 1
            if metric._holders <= 0 and not metric._kept:
                self.remove_metric(metric)

    def _metric(self, labels: Mapping[str, str] | None, buckets: Sequence[float] | None) -> CustomMetric:
        clean = _labels(labels or {}, self.name)
        if self.kind is MetricKind.HISTOGRAM:
            if not buckets:
                raise NaiadError.invalid(f"histogram '{self.name}': a metric needs its bucket boundaries")
            bounds = tuple(float(b) for b in buckets)
            if not all(math.isfinite(b) for b in bounds):
                raise NaiadError.invalid(
                    f"histogram '{self.name}': bucket bounds must be finite numbers (the +Inf "
                    f"bucket is always added), got {list(buckets)}"
                )
            if list(bounds) != sorted(set(bounds)):
                raise NaiadError.invalid(f"histogram '{self.name}': buckets must be increasing, got {list(buckets)}")
        elif buckets:
            raise NaiadError.invalid(f"metric '{self.name}' is a {self.kind.value}: buckets apply to histograms only")
        else:
            bounds = ()
        key = tuple(sorted(clean.items()))
        with self._lock:
            existing = self._metrics.get(key)
            if existing is not None:
                if existing.buckets != bounds:
                    raise NaiadError.invalid(
                        f"histogram '{self.name}' already has a metric with labels {clean} and other buckets"
                    )
                return existing
            metric = self._metrics[key] = CustomMetric(self, clean, bounds)
            return metric

    def remove_metric(self, metric: CustomMetric) -> None:
        with self._lock:
            key = tuple(sorted(metric.labels.items()))
            if self._metrics.get(key) is metric:
                del self._metrics[key]
            metric.removed = True

    def metrics(self) -> list[CustomMetric]:
        with self._lock:
            return list(self._metrics.values())


class CustomMetricRegistry:
    """Every custom family by name. `reserved` names (the server's own families) are refused."""

    def __init__(self, reserved: Sequence[str] = ()) -> None:
        self._lock = threading.RLock()
        self._families: dict[str, CustomMetricFamily] = {}
        self._reserved = set(reserved)

    def family(self, name: str, description: str, kind: MetricKind | str) -> CustomMetricFamily:
        """Create a family, or return the existing one of the same name and kind."""
        with self._lock:
            family = self._family(name, description, kind)
            family._kept = True
            return family

    def acquire_family(self, name: str, description: str, kind: MetricKind | str) -> CustomMetricFamily:
        """`family()`, counted: the family stays until every acquire is released."""
        with self._lock:
            family = self._family(name, description, kind)
            family._holders += 1
            return family

    def release_family(self, family: CustomMetricFamily) -> None:
        """Undo one `acquire_family`; the last release removes the family (and its series)."""
        with self._lock:
            family._holders -= 1
            if family._holders <= 0 and not family._kept and self._families.get(family.name) is family:
                self.remove_family(family.name)

    def _family(self, name: str, description: str, kind: MetricKind | str) -> CustomMetricFamily:
        kind = _kind(kind)
        if not isinstance(name, str) or not _NAME.match(name):
            raise NaiadError.invalid(f"metric family name {name!r} is not a valid Prometheus name")
        if name in self._reserved:
            raise NaiadError.invalid(f"metric family name '{name}' is reserved for the server's own metrics")
        with self._lock:
            existing = self._families.get(name)
            if existing is not None:
                if existing.kind is not kind:
                    raise NaiadError.invalid(
                        f"metric family '{name}' already exists as a {existing.kind.value}, not a {kind.value}"
                    )
                return existing
            family = self._families[name] = CustomMetricFamily(self, name, str(description), kind)
            return family

    def remove_family(self, name: str) -> None:
        with self._lock:
            family = self._families.pop(name, None)
            if family is not None:
                for metric in family.metrics():
                    metric.removed = True

    def families(self) -> list[CustomMetricFamily]:
        with self._lock:
            return list(self._families.values())


def _kind(kind: MetricKind | str) -> MetricKind:
    if isinstance(kind, MetricKind):
        return kind
    try:
        return MetricKind(str(kind).lower())
    except ValueError:
        raise NaiadError.invalid(f"metric kind must be counter, gauge or histogram, got {kind!r}") from None


def _labels(labels: Mapping[str, str], family: str) -> dict[str, str]:
    clean = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not _LABEL.match(key) or key.startswith("__"):
            raise NaiadError.invalid(f"metric family '{family}': label name {key!r} is not a valid Prometheus label")
        if key == "le":
            raise NaiadError.invalid(f"metric family '{family}': label name 'le' is reserved for histogram buckets")
        clean[key] = str(value)
    return clean


def _number(value: object, operation: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NaiadError.invalid(f"metric {operation}() needs a number, got {value!r}")
    return float(value)
