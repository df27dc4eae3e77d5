"""What `--metrics-config`, `--metrics-interval-ms` and `--allow-cpu/gpu-metrics` select.

The server reads these when it builds a model version's statistics (to switch on the
opt-in latency distributions); the metrics frontend reads them for what it exports and
how often it samples CPU and GPU gauges.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import NaiadError
from .latency_summary import (
    DEFAULT_BUCKETS_MS,
    DEFAULT_QUANTILES,
    DURATION_BUCKETS_S,
    batch_size_buckets,
    parse_quantiles,
)

if TYPE_CHECKING:
    from ..config.model_config import ModelConfig
    from ..protos import model_config_pb2 as pb
    from .statistics import ModelStatistics

__all__ = [
    "MetricsSettings",
    "FIRST_RESPONSE_HISTOGRAM",
    "REQUEST_HISTOGRAM",
    "QUEUE_HISTOGRAM",
    "COMPUTE_INFER_HISTOGRAM",
    "BATCH_SIZE_HISTOGRAM",
    "BUILTIN_METRIC_FAMILIES",
    "warn_unknown_metric_families",
]

FIRST_RESPONSE_HISTOGRAM = "nv_inference_first_response_histogram_ms"
# naiad's histograms beside Triton's counters and summaries, named and measured as Prometheus
# advises (base unit seconds, no type in the name: `promtool check metrics` finds nothing in
# them), so a fleet's dashboards aggregate them as any other server's.
REQUEST_HISTOGRAM = "nv_inference_request_duration_seconds"
QUEUE_HISTOGRAM = "nv_inference_queue_duration_seconds"
COMPUTE_INFER_HISTOGRAM = "nv_inference_compute_infer_duration_seconds"
BATCH_SIZE_HISTOGRAM = "nv_inference_batch_size"

# The families a config's `model_metrics` may give buckets to: Triton's one, and naiad's own.
CUSTOMIZABLE_METRIC_FAMILIES = frozenset(
    (FIRST_RESPONSE_HISTOGRAM, REQUEST_HISTOGRAM, QUEUE_HISTOGRAM, COMPUTE_INFER_HISTOGRAM, BATCH_SIZE_HISTOGRAM)
)

log = logging.getLogger("naiad.models")

# The server's own Prometheus families; custom metrics may not take these names.
BUILTIN_METRIC_FAMILIES = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_pending_request_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
    "nv_inference_request_summary_us",
    "nv_inference_queue_summary_us",
    "nv_inference_compute_input_summary_us",
    "nv_inference_compute_infer_summary_us",
    "nv_inference_compute_output_summary_us",
    "nv_inference_first_response_histogram_ms",
    "nv_inference_request_duration_seconds",
    "nv_inference_queue_duration_seconds",
    "nv_inference_compute_infer_duration_seconds",
    "nv_inference_batch_size",
    "nv_model_load_duration_secs",
    "nv_cpu_utilization",
    "nv_cpu_memory_total_bytes",
    "nv_cpu_memory_used_bytes",
    "nv_gpu_utilization",
    "nv_gpu_memory_total_bytes",
    "nv_gpu_memory_used_bytes",
    "nv_gpu_power_usage",
    "nv_gpu_power_limit",
    "nv_energy_consumption",
    "nv_cache_num_hits_per_model",
    "nv_cache_num_misses_per_model",
    "nv_cache_hit_duration_per_model",
    "nv_cache_miss_duration_per_model",
    "nv_cache_util",
    "nv_cache_num_entries",
    "nv_cache_num_hits",
    "nv_cache_num_misses",
    "nv_cache_num_lookups",
    "nv_cache_num_evictions",
    "nv_cache_lookup_duration",
    "nv_cache_insertion_duration",
    "nv_cache_hit_summary_per_model",
    "nv_cache_miss_summary_per_model",
)

_BOOL = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


@dataclass
class MetricsSettings:
    counter_latencies: bool = True
    summary_latencies: bool = False
    summary_quantiles: tuple[tuple[float, float], ...] = DEFAULT_QUANTILES
    histogram_latencies: bool = False
    duration_histograms: bool = True
    interval_ms: float = 2000
    allow_cpu_metrics: bool = True
    allow_gpu_metrics: bool = True

    @classmethod
    def from_config(cls, items: Iterable[str], **fields: object) -> MetricsSettings:
        """Apply `--metrics-config KEY=VALUE` items (tritonserver's keys) over defaults."""
        settings = cls(**fields)  # type: ignore[arg-type]
        for item in items:
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep:
                raise NaiadError.invalid(f"--metrics-config: expected KEY=VALUE, got '{item}'")
            if key in ("counter_latencies", "summary_latencies", "histogram_latencies", "duration_histograms"):
                if value.lower() not in _BOOL:
                    raise NaiadError.invalid(f"--metrics-config {key}: expected true or false, got '{value}'")
                setattr(settings, key, _BOOL[value.lower()])
            elif key == "summary_quantiles":
                try:
                    settings.summary_quantiles = parse_quantiles(value)
                except ValueError as exc:
                    raise NaiadError.invalid(f"--metrics-config {exc}") from None
            else:
                raise NaiadError.invalid(
                    f"--metrics-config: unknown setting '{key}' (known: counter_latencies, summary_latencies, "
                    "summary_quantiles, histogram_latencies, duration_histograms)"
                )
        if settings.interval_ms <= 0:
            raise NaiadError.invalid(f"--metrics-interval-ms must be positive, got {settings.interval_ms}")
        return settings

    def prepare(self, statistics: ModelStatistics, config: ModelConfig) -> None:
        """Switch on the distributions these settings ask for on a new version's statistics."""
        if self.summary_latencies:
            statistics.enable_summaries(self.summary_quantiles)
        if self.histogram_latencies and config.decoupled:
            statistics.enable_first_response_histogram(histogram_buckets(config, FIRST_RESPONSE_HISTOGRAM))
        if self.duration_histograms:
            statistics.enable_histograms(
                histogram_buckets(config, REQUEST_HISTOGRAM),
                histogram_buckets(config, QUEUE_HISTOGRAM),
                histogram_buckets(config, COMPUTE_INFER_HISTOGRAM),
                histogram_buckets(config, BATCH_SIZE_HISTOGRAM),
            )


def _default_buckets(config: ModelConfig, family: str) -> tuple[float, ...]:
    if family == FIRST_RESPONSE_HISTOGRAM:
        return DEFAULT_BUCKETS_MS
    if family == BATCH_SIZE_HISTOGRAM:
        return batch_size_buckets(config.proto.max_batch_size)
    return DURATION_BUCKETS_S


def histogram_buckets(config: ModelConfig, family: str) -> tuple[float, ...]:
    """The buckets a model's `model_metrics` block sets for a histogram family, else its
    defaults; bounds that do not strictly increase are refused (as Prometheus clients refuse
    them), naming the model and the family."""
    for control in config.proto.model_metrics.metric_control:
        buckets = tuple(control.histogram_options.buckets)
        if control.metric_identifier.family != family or not buckets:
            continue
        if any(not earlier < later for earlier, later in zip(buckets, buckets[1:])):
            shown = ", ".join(f"{b:g}" for b in buckets)
            raise NaiadError.invalid(
                f"model '{config.name}': model_metrics buckets of '{family}' must strictly increase, got [{shown}]"
            )
        return buckets
    return _default_buckets(config, family)


def warn_unknown_metric_families(proto: pb.ModelConfig, model: str) -> None:
    """Log, in Triton's words, each `model_metrics` family that has no buckets to set: the
    load goes on (Triton's does too), but the block has no effect."""
    for control in proto.model_metrics.metric_control:
        family = control.metric_identifier.family
        if family not in CUSTOMIZABLE_METRIC_FAMILIES:
            log.warning(
                "model '%s': Metric family '%s' in 'metric_identifier' is not a customizable metric in Triton core.",
                model,
                family,
            )
