"""Opt-in latency distributions behind `--metrics-config summary_latencies=true` and
`histogram_latencies=true`.

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

__all__ = ["DEFAULT_QUANTILES", "DEFAULT_BUCKETS_MS", "LatencySummary", "LatencyHistogram", "parse_quantiles"]

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
    """Cumulative bucket counts over `buckets` upper bounds (milliseconds)."""

    buckets: tuple[float, ...] = DEFAULT_BUCKETS_MS
    count: int = 0
    total: float = 0.0
    _counts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.buckets = tuple(sorted(self.buckets))
        self._counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.count += 1
        self.total += value
        self._counts[bisect.bisect_left(self.buckets, value)] += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), ending with (+inf, count)."""
        out, running = [], 0
        for bound, n in zip((*self.buckets, math.inf), self._counts):
            running += n
            out.append((bound, running))
        return out
