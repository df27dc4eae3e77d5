"""perf_analyzer's stability rule: a step is measured when its last three windows agree,
throughput and latency each, within the stability percentage (max / min <= 1 + pct/100),
and none of the three had zero throughput (a window whose requests all failed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["STABILITY_WINDOWS", "WindowFigures", "is_stable"]

STABILITY_WINDOWS = 3


@dataclass(frozen=True, slots=True)
class WindowFigures:
    throughput: float
    # The latency the rule watches: the average, or the --percentile one.
    latency_us: float


def is_stable(windows: Sequence[WindowFigures], stability_percentage: float) -> bool:
    if len(windows) < STABILITY_WINDOWS:
        return False
    last = windows[-STABILITY_WINDOWS:]
    if any(w.throughput <= 0 or w.latency_us <= 0 for w in last):
        return False
    bound = 1 + stability_percentage / 100

    def within(values: list[float]) -> bool:
        return max(values) / min(values) <= bound

    return within([w.throughput for w in last]) and within([w.latency_us for w in last])
