"""What the duration and batch-size histograms cost each request: the statistics updates one
request makes (queue wait, one execution, success), timed with the histograms off and on, in
the same process and run (`--metrics-config duration_histograms=false|true`).

    .venv/bin/python bench/histogram_cost.py
"""

from __future__ import annotations

import time

from naiad.observability.latency_summary import DURATION_BUCKETS_S, batch_size_buckets
from naiad.observability.statistics import ModelStatistics


def per_request_ns(histograms: bool, n: int = 200_000) -> float:
    stats = ModelStatistics("m", "1")
    if histograms:
        stats.enable_histograms(DURATION_BUCKETS_S, DURATION_BUCKETS_S, DURATION_BUCKETS_S, batch_size_buckets(8))
    started = time.perf_counter()
    for i in range(n):
        stats.queue.add(20_000 + i)
        stats.record_execution(1, 1, 0, 150_000, 0)
        stats.record_success(300_000 + i)
    return (time.perf_counter() - started) / n * 1e9


def main() -> None:
    for _ in range(3):
        off, on = per_request_ns(False), per_request_ns(True)
        print(f"statistics per request: histograms off {off:.0f} ns, on {on:.0f} ns, added {on - off:.0f} ns")


if __name__ == "__main__":
    main()
