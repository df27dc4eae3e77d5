"""The per-model families, read at scrape time from the `ModelStatistics` objects the
statistics extension also reads, so the two always agree; and the custom families models
define in `server.custom_metrics`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...observability.custom_metrics import MetricKind
from ...observability.latency_summary import LatencyHistogram
from ...observability.metrics_settings import (
    BATCH_SIZE_HISTOGRAM,
    COMPUTE_INFER_HISTOGRAM,
    FIRST_RESPONSE_HISTOGRAM,
    QUEUE_HISTOGRAM,
    REQUEST_HISTOGRAM,
)
from ...observability.statistics import ModelStatistics
from .exposition import Family, bound_label

if TYPE_CHECKING:
    from ...server import Server

__all__ = ["model_families", "cache_families", "custom_families", "histogram_sources", "FAILURE_REASONS"]

FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")

# (family, help, ModelStatistics duration, summary family, summary help)
_LATENCIES = (
    (
        "nv_inference_request_duration_us",
        "Total time of successful inference requests in the server, microseconds",
        "success",
        "nv_inference_request_summary_us",
        "Inference request time, microseconds (sliding window)",
    ),
    (
        "nv_inference_queue_duration_us",
        "Total time requests waited in the queue for an instance, microseconds",
        "queue",
        "nv_inference_queue_summary_us",
        "Queue time of requests, microseconds (sliding window)",
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Total time spent preparing inputs for executions, microseconds",
        "compute_input",
        "nv_inference_compute_input_summary_us",
        "Input preparation time, microseconds (sliding window)",
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Total time models spent executing requests, microseconds",
        "compute_infer",
        "nv_inference_compute_infer_summary_us",
        "Model execution time, microseconds (sliding window)",
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Total time spent gathering outputs of executions, microseconds",
        "compute_output",
        "nv_inference_compute_output_summary_us",
        "Output gathering time, microseconds (sliding window)",
    ),
)


def model_families(server: Server, counter_latencies: bool = True) -> list[Family]:
    versions: list[ModelStatistics] = []
    if server.models is not None:
        versions = [v.statistics for v in sorted(server.models.ready_models(), key=lambda v: (v.name, v.version))]
    success = Family("nv_inference_request_success", "Inference requests that succeeded, all batch sizes", "counter")
    failure = Family(
        "nv_inference_request_failure", "Inference requests that failed, by reason, all batch sizes", "counter"
    )
    count = Family("nv_inference_count", "Inferences performed (a batch of 8 counts 8)", "counter")
    executions = Family("nv_inference_exec_count", "Model executions performed (a batch of 8 counts 1)", "counter")
    pending = Family(
        "nv_inference_pending_request_count", "Requests received and waiting for an instance, now", "gauge"
    )
    load = Family("nv_model_load_duration_secs", "Seconds the last load of the model version took", "gauge")
    durations = [Family(name, text, "counter") for name, text, _, _, _ in _LATENCIES]
    summaries = [Family(name, text, "summary") for _, _, _, name, text in _LATENCIES]
    histograms = {
        FIRST_RESPONSE_HISTOGRAM: Family(
            FIRST_RESPONSE_HISTOGRAM, "Time from a request's arrival to its first response, milliseconds", "histogram"
        ),
        REQUEST_HISTOGRAM: Family(
            REQUEST_HISTOGRAM, "End-to-end time of successful inference requests in the server, seconds", "histogram"
        ),
        QUEUE_HISTOGRAM: Family(
            QUEUE_HISTOGRAM, "Time requests waited in the queue for an instance, seconds", "histogram"
        ),
        COMPUTE_INFER_HISTOGRAM: Family(
            COMPUTE_INFER_HISTOGRAM, "Model execution time per request, seconds", "histogram"
        ),
        BATCH_SIZE_HISTOGRAM: Family(BATCH_SIZE_HISTOGRAM, "Inferences per model execution (batch size)", "histogram"),
    }
    for stats in versions:
        labels = (("model", stats.name), ("version", stats.version))
        success.add(stats.success.count, labels)
        for reason in FAILURE_REASONS:
            failure.add(
                stats.failures_by_reason.get(reason, 0),
                (("model", stats.name), ("reason", reason), ("version", stats.version)),
            )
        count.add(stats.inference_count, labels)
        executions.add(stats.execution_count, labels)
        pending.add(stats.pending, labels)
        load.add(round(stats.load_duration_s, 6), labels)
        for family, (_, _, key, _, _) in zip(durations, _LATENCIES):
            family.add(getattr(stats, key).ns // 1000, labels)
        if stats.summaries is not None:
            for family, (_, _, key, _, _) in zip(summaries, _LATENCIES):
                _add_summary(family, stats, key, labels)
        for name, h in histogram_sources(stats).items():
            _add_histogram(histograms[name], h, labels)
    out = [success, failure, count, executions]
    if counter_latencies:
        out += durations
    out.append(pending)
    out += [f for f in summaries if f.samples]
    out += [f for f in histograms.values() if f.samples]
    out.append(load)
    return out


# (family, help, ModelStatistics duration, Duration field, scale): Triton's per-model cache
# counters, written only for models that use the cache.
_CACHE_COUNTERS = (
    ("nv_cache_num_hits_per_model", "Number of cache hits per model", "cache_hit", "count", 1),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model", "cache_miss", "count", 1),
    ("nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds", "cache_hit", "ns", 1000),
    (
        "nv_cache_miss_duration_per_model",
        "Total cache miss (insert+lookup) duration per model, in microseconds",
        "cache_miss",
        "ns",
        1000,
    ),
)

# With --metrics-config summary_latencies=true.
_CACHE_SUMMARIES = (
    ("nv_cache_hit_summary_per_model", "Summary of cache hit durations per model, in microseconds", "cache_hit"),
    ("nv_cache_miss_summary_per_model", "Summary of cache miss durations per model, in microseconds", "cache_miss"),
)

# Triton's local-cache gauges, server-wide.
_CACHE_GAUGES = {
    "nv_cache_util": "Cache utilization [0.0 - 1.0]",
    "nv_cache_num_entries": "Number of responses stored in response cache",
    "nv_cache_num_hits": "Number of cache hits in response cache",
    "nv_cache_num_misses": "Number of cache misses in response cache",
    "nv_cache_num_lookups": "Number of cache lookups in response cache",
    "nv_cache_num_evictions": "Number of cache evictions in response cache",
    "nv_cache_lookup_duration": "Total cache lookup duration (hit and miss), in microseconds",
    "nv_cache_insertion_duration": "Total cache insertion duration, in microseconds",
}


def cache_families(server: Server) -> list[Family]:
    """The response-cache families: per model for the models using the cache, and the
    cache's own server-wide gauges. None without a cache, as Triton writes none."""
    cache = server.response_cache
    if cache is None or server.models is None:
        return []
    using = [
        v.statistics
        for v in sorted(server.models.ready_models(), key=lambda v: (v.name, v.version))
        if v.config.proto.response_cache.enable
    ]
    out = []
    for name, text, key, part, scale in _CACHE_COUNTERS:
        family = Family(name, text, "counter")
        for stats in using:
            family.add(getattr(getattr(stats, key), part) // scale, (("model", stats.name), ("version", stats.version)))
        if family.samples:
            out.append(family)
    for name, text, key in _CACHE_SUMMARIES:
        family = Family(name, text, "summary")
        for stats in using:
            if stats.summaries is not None:
                _add_summary(family, stats, key, (("model", stats.name), ("version", stats.version)))
        if family.samples:
            out.append(family)
    for name, value in cache.gauges().items():
        family = Family(name, _CACHE_GAUGES[name], "gauge")
        family.add(value)
        out.append(family)
    return out


def histogram_sources(stats: ModelStatistics) -> dict[str, LatencyHistogram]:
    """The histograms a version's statistics keep, by family name (those switched on)."""
    found = {
        FIRST_RESPONSE_HISTOGRAM: stats.first_response_histogram,
        REQUEST_HISTOGRAM: stats.success.histogram,
        QUEUE_HISTOGRAM: stats.queue.histogram,
        COMPUTE_INFER_HISTOGRAM: stats.compute_infer.histogram,
        BATCH_SIZE_HISTOGRAM: stats.batch_size_histogram,
    }
    return {name: h for name, h in found.items() if h is not None}


def _add_histogram(family: Family, h: LatencyHistogram, labels: tuple[tuple[str, str], ...]) -> None:
    for bound, n in h.cumulative():
        family.add(n, (*labels, ("le", bound_label(bound))), "_bucket")
    family.add(h.total, labels, "_sum")
    family.add(h.count, labels, "_count")


def _add_summary(family: Family, stats: ModelStatistics, key: str, labels: tuple[tuple[str, str], ...]) -> None:
    assert stats.summaries is not None
    summary = stats.summaries[key]
    family.add(summary.count, labels, "_count")
    family.add(round(summary.total), labels, "_sum")
    for q, value in summary.quantile_values():
        family.add(value, (*labels, ("quantile", bound_label(q))))


def custom_families(server: Server) -> list[Family]:
    out = []
    for custom in server.custom_metrics.families():
        family = Family(custom.name, custom.description, custom.kind.value)
        for metric in custom.metrics():
            labels = tuple(sorted(metric.labels.items()))
            value, observed, buckets = metric.snapshot()
            if custom.kind is MetricKind.HISTOGRAM:
                for bound, n in buckets:
                    family.add(n, (*labels, ("le", bound_label(bound))), "_bucket")
                family.add(value, labels, "_sum")
                family.add(observed, labels, "_count")
            else:
                family.add(value, labels)
        if family.samples:  # a family without series is not written (as prometheus-cpp does for Triton)
            out.append(family)
    return out
