"""The figures behind the status page (`GET /` of the HTTP port, its JSON at `GET /status`).

Everything here is read from what the server keeps anyway (the repository index, each
version's `ModelStatistics` and its histograms), at the moment the page asks: nothing on
the request path feeds the page. Figures are cumulative, as Prometheus counters are; the
page turns two readings into rates (requests/s, busy share) and windowed quantiles.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .latency_summary import LatencyHistogram
from .statistics import ModelStatistics

__all__ = ["VersionFigures", "status_report", "resident_bytes"]


@dataclass(frozen=True, slots=True)
class VersionFigures:
    """One serving version: its statistics and the number of instances that execute it."""

    statistics: ModelStatistics
    instances: int


def resident_bytes() -> int | None:
    """This process's resident memory (Linux /proc); None where it cannot be read."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _histogram(h: LatencyHistogram | None) -> dict[str, Any] | None:
    if h is None:
        return None
    # The last cumulative count is the +Inf bucket's: JSON has no infinity, so bounds are
    # one shorter than counts.
    return {"bounds": list(h.buckets), "counts": [n for _, n in h.cumulative()], "sum": h.total}


def _figures(version: VersionFigures) -> dict[str, Any]:
    stats = version.statistics
    # Wall time instances spent executing, once per execution (the per-request compute
    # durations count a batch once per request).
    busy_ns = sum(b.compute_input.ns + b.compute_infer.ns + b.compute_output.ns for b in stats.batches.values())
    return {
        "success": stats.success.count,
        "failure": stats.fail.count,
        "inferences": stats.inference_count,
        "executions": stats.execution_count,
        "pending": stats.pending,
        "instances": version.instances,
        "busy_ns": busy_ns,
        "request_ns": stats.success.ns,
        "queue_ns": stats.queue.ns,
        "queue_count": stats.queue.count,
        "cache_hits": stats.cache_hit.count,
        "cache_misses": stats.cache_miss.count,
        "batch_sizes": {str(size): stats.batches[size].compute_infer.count for size in sorted(stats.batches)},
        "histograms": {
            "request_s": _histogram(stats.success.histogram),
            "queue_s": _histogram(stats.queue.histogram),
            "compute_infer_s": _histogram(stats.compute_infer.histogram),
            "batch_size": _histogram(stats.batch_size_histogram),
        },
    }


def status_report(
    index: Iterable[Mapping[str, str]],
    serving: Iterable[VersionFigures],
    *,
    server: Mapping[str, Any],
) -> dict[str, Any]:
    """`{"server": {...}, "models": [...]}`: every row of the repository index (name,
    version, state, reason) with the figures of the version when it serves."""
    by_key = {(v.statistics.name, v.statistics.version): v for v in serving}
    models = []
    for row in index:
        version = by_key.get((row["name"], row.get("version", "")))
        models.append(
            {
                "name": row["name"],
                "version": row.get("version", ""),
                "state": row.get("state", ""),
                "reason": row.get("reason", ""),
                "figures": None if version is None else _figures(version),
            }
        )
    return {"server": dict(server), "models": models}
