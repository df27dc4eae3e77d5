"""`latency_summary`: average and percentiles of request latencies, picked as perf_analyzer
picks them (the sorted latencies' element at round(p/100 x (n-1)))."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["REPORTED_PERCENTILES", "latency_summary"]

REPORTED_PERCENTILES = (50, 90, 95, 99)


def latency_summary(latencies_ns: Sequence[int], extra_percentile: int | None = None) -> dict[str, float]:
    """{"avg": us, "p50": us, ...} (and "pNN" for an extra percentile); {} for no latencies."""
    if not latencies_ns:
        return {}
    ordered = sorted(latencies_ns)
    summary = {"avg": sum(ordered) / len(ordered) / 1000}
    wanted = sorted(set(REPORTED_PERCENTILES) | ({extra_percentile} if extra_percentile is not None else set()))
    for percentile in wanted:
        index = int(percentile / 100.0 * (len(ordered) - 1) + 0.5)
        summary[f"p{percentile}"] = ordered[index] / 1000
    return summary
