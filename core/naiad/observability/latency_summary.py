"""Latency distributions: the opt-in summaries (`--metrics-config summary_latencies=true`)
and first-response histogram (`histogram_latencies=true`), and the duration and batch-size
histograms (on unless `duration_histograms=false`).

A `LatencySummary` keeps the observations of a sliding time window and answers quantiles
at scrape time, as Prometheus summaries do; a `LatencyHistogram` counts observations into
fixed buckets. Both are fed on the event loop by `ModelStatistics` and read by the
metrics frontend, also on the event loop, so neither takes a lock.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_QUANTILES",
    "DEFAULT_BUCKETS_MS",
    "DURATION_BUCKETS_S",
    "LatencySummary",
    "LatencyHistogram",
    "parse_quantiles",
    "batch_size_buckets",
]

# tritonserver's default `summary_quantiles`: quantile:allowed error pairs.
DEFAULT_QUANTILES: tuple[tuple[float, float], ...] = (
    (0.5, 0.05),
    (0.9, 0.01),
    (0.95, 0.001),
    (0.99, 0.001),
    (0.999, 0.001),
)
# tritonserver's default buckets of nv_inference_first_response_histogram_ms.
DEFAULT_BUCKETS_MS: tuple[float, ...] = (100.0, 500.0, 2000.0, 5000.0)
# Buckets of the request, queue and compute-infer duration histograms: an inference server's
# requests take from tens of microseconds (a small model on CPU) to seconds (a large one),
# so the bounds step 1-2.5-5 over that whole range; quantiles read from them are within a
# bucket's width.
DURATION_BUCKETS_S: tuple[float, ...] = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip


def batch_size_buckets(max_batch_size: int) -> tuple[float, ...]:
    """Powers of two up to the model's largest batch, and that batch itself: each bucket of
    the batch-size histogram is then a size the dynamic batcher's preferences usually name."""
    bounds, size = [], 1
    while size < max_batch_size:
        bounds.append(float(size))
        size *= 2
    bounds.append(float(max(max_batch_size, 1)))
    return tuple(bounds)


def parse_quantiles(text: str) -> tuple[tuple[float, float], ...]:
    """`0.5:0.05,0.9:0.01` (tritonserver's `summary_quantiles` syntax)."""
    pairs = []
    for item in text.split(","):
        quantile, sep, error = item.strip().partition(":")
        try:
            q, e = float(quantile), float(error) if sep else 0.0
        except ValueError:
            raise ValueError(f"summary_quantiles: expected QUANTILE:ERROR pairs, got '{item}'") from None
        if not 0.0 <= q <= 1.0 or not 0.0 <= e <= 1.0:
            raise ValueError(f"summary_quantiles: quantile and error must lie in [0, 1], got '{item}'")
        pairs.append((q, e))
    if not pairs:
        raise ValueError("summary_quantiles: no quantiles given")
    return tuple(pairs)


@dataclass(slots=True)
class LatencySummary:
    """Observations (microseconds) of the last `max_age_s` seconds, at most `capacity` of
    them, plus the all-time count and sum a Prometheus summary also reports."""

    quantiles: tuple[tuple[float, float], ...] = DEFAULT_QUANTILES
    max_age_s: float = 60.0
    capacity: int = 4096
    count: int = 0
    total: float = 0.0
    _window: deque[tuple[float, float]] = field(default_factory=deque)

    def observe(self, value: float) -> None:
        self.count += 1
        self.total += value
        self._window.append((time.monotonic(), value))
        if len(self._window) > self.capacity:
            self._window.popleft()

    def quantile_values(self) -> list[tuple[float, float]]:
        """(quantile, value) for each configured quantile; NaN over an empty window."""
        horizon = time.monotonic() - self.max_age_s
        while self._window and self._window[0][0] < horizon:
            self._window.popleft()
        values = sorted(v for _, v in self._window)
        out = []
        for q, _ in self.quantiles:
            if not values:
                out.append((q, math.nan))
                continue
            rank = min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))
            out.append((q, values[rank]))
        return out


@dataclass(slots=True)
class LatencyHistogram:
    """Cumulative bucket counts over `buckets` upper bounds (a duration's unit, or a batch size)."""

    buckets: tuple[float, ...] = DEFAULT_BUCKETS_MS
    count: int = 0
    total: float = 0.0
    _counts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.buckets = tuple(sorted(self.buckets))
        self._counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float, times: int = 1) -> None:
        """`times` observations of `value` (a batch's requests share its execution time)."""
        self.count += times
        self.total += value * times
        self._counts[bisect.bisect_left(self.buckets, value)] += times

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), ending with (+inf, count)."""
        out, running = [], 0
        for bound, n in zip((*self.buckets, math.inf), self._counts):
            running += n
            out.append((bound, running))
        return out
