"""`MetricOwner`: the server's side of one model instance's custom metrics.

It maps the handles the model side uses to families and series of the core registry
(`server.custom_metrics`), holding each through `acquire_*` so instances that create the
same family and labels share one series, and `release_all` (at unload, or when a model
process ends) takes away what this instance created. `serve` answers the stub's metric
messages, for process mode; the in-process bridge calls the methods directly.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from naiad.backend import NaiadError

if TYPE_CHECKING:
    from naiad.backend.helpers import CustomMetric, CustomMetricFamily, CustomMetricRegistry

__all__ = ["MetricOwner", "METRIC_OPS"]

log = logging.getLogger("naiad.backends.python")

# The stub's metric messages; those with a "qid" get a "metric_reply".
METRIC_OPS = frozenset({"metric_family_new", "metric_family_delete", "metric_new", "metric_update", "metric_value"})


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

    # -- process mode ----------------------------------------------------------------------

    def serve(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Apply one of the stub's metric messages; the reply to send, if it wants one."""
        op = message["op"]
        result: float | None = None
        try:
            if op == "metric_family_new":
                self.family_new(message["handle"], message["name"], message["description"], message["kind"])
            elif op == "metric_family_delete":
                self.family_delete(message["handle"])
            elif op == "metric_new":
                self.metric_new(message["handle"], message["family"], message["labels"], message.get("buckets"))
            elif op == "metric_update":
                self.update(message["handle"], message["operation"], message["value"])
            elif op == "metric_value":
                result = self.value(message["handle"])
        except NaiadError as exc:
            if "qid" not in message:
                log.warning("%s: custom metric %s failed: %s", self.label, op, exc.message)
                return None
            return {"op": "metric_reply", "qid": message["qid"], "error": exc.message}
        if "qid" not in message:
            return None
        return {"op": "metric_reply", "qid": message["qid"], "error": None, "value": result}
