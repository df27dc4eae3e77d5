"""`MetricOwner`: the server's side of one model instance's custom metrics.

It maps the handles the model side uses to families and series of the core registry
(`server.custom_metrics`), holding each through `acquire_*` so instances that create the
same family and labels share one series, and `release_all` (at unload, or when a model
process ends) takes away what this instance created. The in-process bridge calls its
methods directly; in process mode the stub's metric messages do (stub_connection.py).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from naiad.backend import NaiadError

if TYPE_CHECKING:
    from naiad.backend.helpers import CustomMetric, CustomMetricFamily, CustomMetricRegistry

__all__ = ["MetricOwner"]


class MetricOwner:
    def __init__(self, registry: CustomMetricRegistry | None, label: str) -> None:
        self.registry = registry
        self.label = label
        self._lock = threading.Lock()
        self._families: dict[int, CustomMetricFamily] = {}
        # metric handle -> (family handle, series)
        self._metrics: dict[int, tuple[int, CustomMetric]] = {}

    def _registry(self) -> CustomMetricRegistry:
        if self.registry is None:
            raise NaiadError.unavailable("custom metrics are not available (the model is not served by a server)")
        return self.registry

    def family_new(self, handle: int, name: str, description: str, kind: str) -> None:
        family = self._registry().acquire_family(name, description, kind)
        with self._lock:
            self._families[handle] = family

    def family_delete(self, handle: int) -> None:
        with self._lock:
            family = self._families.pop(handle, None)
            metrics = [(h, m) for h, (f, m) in self._metrics.items() if f == handle]
            for metric_handle, _ in metrics:
                del self._metrics[metric_handle]
        if family is None:
            return
        for _, metric in metrics:
            family.release_metric(metric)
        self._registry().release_family(family)

    def metric_new(self, handle: int, family_handle: int, labels: dict[str, str], buckets: list[float] | None) -> None:
        with self._lock:
            family = self._families.get(family_handle)
        if family is None:
            raise NaiadError.invalid("its MetricFamily has been deleted")
        metric = family.acquire_metric(labels, buckets)
        with self._lock:
            self._metrics[handle] = (family_handle, metric)

    def _metric(self, handle: int) -> CustomMetric:
        with self._lock:
            entry = self._metrics.get(handle)
        if entry is None:
            raise NaiadError.invalid("the metric has been deleted (with its MetricFamily)")
        return entry[1]

    def update(self, handle: int, operation: str, value: float) -> None:
        metric = self._metric(handle)
        if operation == "increment":
            metric.increment(value)
        elif operation == "set":
            metric.set(value)
        elif operation == "observe":
            metric.observe(value)
        else:
            raise NaiadError.invalid(f"unknown metric operation {operation!r}")

    def value(self, handle: int) -> float:
        return self._metric(handle).value()

    def release_all(self) -> None:
        """Drop everything this instance created (it unloaded, or its process ended)."""
        with self._lock:
            handles = list(self._families)
        for handle in handles:
            self.family_delete(handle)
