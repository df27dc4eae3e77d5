"""Per-model-version counters behind the statistics extension and the Prometheus metrics.

One `ModelStatistics` per loaded version; schedulers update it on the event loop, so no
lock is needed. Field names follow Triton's statistics extension.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .latency_summary import DEFAULT_BUCKETS_MS, DEFAULT_QUANTILES, LatencyHistogram, LatencySummary

__all__ = ["Duration", "BatchStatistics", "ModelStatistics", "failure_reason"]


def failure_reason(error: Any, cancelled: bool = False) -> str:
    """The `reason` label of nv_inference_request_failure for a failed request: CANCELED
    when the client went away, REJECTED when a scheduler refused it (UNAVAILABLE: queue
    full, model unloading), BACKEND when the model failed."""
    code = getattr(getattr(error, "code", None), "value", None)
    if cancelled or code == "CANCELLED":
        return "CANCELED"
    if code == "UNAVAILABLE":
        return "REJECTED"
    return "BACKEND"


@dataclass(slots=True)
class Duration:
    count: int = 0
    ns: int = 0
    # Set only when latency summaries are on; gets each request's share in microseconds.
    observer: Callable[[float], None] | None = field(default=None, repr=False, compare=False)
    # Set when duration histograms are on; counts each request's share in seconds.
    histogram: LatencyHistogram | None = field(default=None, repr=False, compare=False)

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns
        if count > 0:
            if self.histogram is not None:
                self.histogram.observe(ns / count / 1e9, count)
            if self.observer is not None:
                each_us = ns / count / 1000.0
                for _ in range(count):
                    self.observer(each_us)

    def to_dict(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass(slots=True)
class BatchStatistics:
    batch_size: int
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "compute_input": self.compute_input.to_dict(),
            "compute_infer": self.compute_infer.to_dict(),
            "compute_output": self.compute_output.to_dict(),
        }


@dataclass(slots=True)
class ModelStatistics:
    """Counters of one model version.

    `success`/`fail` count requests and their end-to-end time in the server; `queue` the
    time requests waited for an instance; `compute_*` the time of executions, counted per
    request as Triton does. `inference_count` counts inferences (a batch of 8 counts 8),
    `execution_count` counts executions (a batch of 8 counts 1).
    """

    name: str
    version: str
    success: Duration = field(default_factory=Duration)
    fail: Duration = field(default_factory=Duration)
    queue: Duration = field(default_factory=Duration)
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)
    cache_hit: Duration = field(default_factory=Duration)
    cache_miss: Duration = field(default_factory=Duration)
    inference_count: int = 0
    execution_count: int = 0
    last_inference_ms: int = 0
    batches: dict[int, BatchStatistics] = field(default_factory=dict)
    # Failures by reason ("REJECTED", "CANCELED", "BACKEND", "OTHER"), as Triton's
    # nv_inference_request_failure labels them.
    failures_by_reason: dict[str, int] = field(default_factory=dict)
    # Requests received and not yet taken by an instance (nv_inference_pending_request_count).
    pending: int = 0
    # Seconds the last load of this version took (nv_model_load_duration_secs).
    load_duration_s: float = 0.0
    # Opt-in distributions (see `enable_summaries`, `enable_first_response_histogram`);
    # None costs nothing on the request path.
    summaries: dict[str, LatencySummary] | None = None
    first_response_histogram: LatencyHistogram | None = None
    # Inferences per execution (see `enable_histograms`; the durations' are on the Durations).
    batch_size_histogram: LatencyHistogram | None = None

    def enable_summaries(self, quantiles: tuple[tuple[float, float], ...] = DEFAULT_QUANTILES) -> None:
        """Feed a sliding-window summary from the success, queue and compute durations."""
        if self.summaries is not None:
            return
        self.summaries = {}
        for key in ("success", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"):
            summary = self.summaries[key] = LatencySummary(quantiles)
            getattr(self, key).observer = summary.observe

    def enable_histograms(
        self,
        request_s: tuple[float, ...],
        queue_s: tuple[float, ...],
        compute_infer_s: tuple[float, ...],
        batch_sizes: tuple[float, ...],
    ) -> None:
        """Count request (successful), queue and compute-infer durations and batch sizes into
        buckets, for Prometheus histograms a fleet can sum across servers."""
        # A reload keeps the counts (statistics live as long as the server) unless the new
        # config moved the bounds.
        for duration, bounds in (
            (self.success, request_s),
            (self.queue, queue_s),
            (self.compute_infer, compute_infer_s),
        ):
            if duration.histogram is None or duration.histogram.buckets != tuple(sorted(bounds)):
                duration.histogram = LatencyHistogram(bounds)
        if self.batch_size_histogram is None or self.batch_size_histogram.buckets != tuple(sorted(batch_sizes)):
            self.batch_size_histogram = LatencyHistogram(batch_sizes)

    def enable_first_response_histogram(self, buckets_ms: tuple[float, ...] = DEFAULT_BUCKETS_MS) -> None:
        if self.first_response_histogram is None:
            self.first_response_histogram = LatencyHistogram(tuple(buckets_ms))

    def record_first_response(self, ns: int) -> None:
        """Time from arrival to a request's first response (decoupled models)."""
        if self.first_response_histogram is not None:
            self.first_response_histogram.observe(ns / 1e6)

    def record_success(self, request_ns: int) -> None:
        self.success.add(request_ns)
        self.last_inference_ms = int(time.time() * 1000)

    def record_failure(self, request_ns: int, reason: str = "BACKEND") -> None:
        self.fail.add(request_ns)
        self.failures_by_reason[reason] = self.failures_by_reason.get(reason, 0) + 1
        self.last_inference_ms = int(time.time() * 1000)

    def record_execution(
        self, batch_size: int, request_count: int, input_ns: int, infer_ns: int, output_ns: int
    ) -> None:
        """One execution of `request_count` requests holding `batch_size` inferences."""
        self.execution_count += 1
        self.inference_count += batch_size
        if self.batch_size_histogram is not None:
            self.batch_size_histogram.observe(batch_size)
        self.compute_input.add(input_ns * request_count, request_count)
        self.compute_infer.add(infer_ns * request_count, request_count)
        self.compute_output.add(output_ns * request_count, request_count)
        batch = self.batches.get(batch_size)
        if batch is None:
            batch = self.batches[batch_size] = BatchStatistics(batch_size)
        batch.compute_input.add(input_ns)
        batch.compute_infer.add(infer_ns)
        batch.compute_output.add(output_ns)

    def record_failed_execution(self, batch_size: int, infer_ns: int) -> None:
        """An execution that raised: tritonserver counts it in `execution_count` and the
        batch statistics, but not in `inference_count` or the per-request compute times."""
        self.execution_count += 1
        batch = self.batches.get(batch_size)
        if batch is None:
            batch = self.batches[batch_size] = BatchStatistics(batch_size)
        batch.compute_infer.add(infer_ns)
        batch.compute_input.add(0)
        batch.compute_output.add(0)

    def to_dict(self) -> dict[str, Any]:
        """Triton's JSON shape of one entry of `model_stats`."""
        return {
            "name": self.name,
            "version": self.version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.to_dict(),
                "fail": self.fail.to_dict(),
                "queue": self.queue.to_dict(),
                "compute_input": self.compute_input.to_dict(),
                "compute_infer": self.compute_infer.to_dict(),
                "compute_output": self.compute_output.to_dict(),
                "cache_hit": self.cache_hit.to_dict(),
                "cache_miss": self.cache_miss.to_dict(),
            },
            "batch_stats": [self.batches[size].to_dict() for size in sorted(self.batches)],
            "memory_usage": [],
            # Per-response counters of decoupled models; Triton reports an empty map otherwise.
            "response_stats": {},
        }
