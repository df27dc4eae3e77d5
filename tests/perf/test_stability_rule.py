"""perf_analyzer's stability rule and latency percentiles, as `naiad perf` applies them
(inference_profiler.cc: the last three windows, max/min <= 1 + threshold on throughput and
on latency; the percentile is the sorted latencies' element at round(p/100 x (n-1)))."""

from __future__ import annotations

import pytest

from naiad.loadgen.latency_summary import latency_summary
from naiad.loadgen.stability import WindowFigures, is_stable


def windows(*pairs: tuple[float, float]) -> list[WindowFigures]:
    return [WindowFigures(throughput, latency) for throughput, latency in pairs]


@pytest.mark.parametrize(
    ("figures", "percentage", "stable"),
    [
        (windows((100, 1000), (105, 1020)), 10, False),  # fewer than three windows
        (windows((100, 1000), (105, 1020), (109, 1050)), 10, True),  # 109/100 and 1050/1000 within 10%
        (windows((100, 1000), (105, 1020), (111, 1050)), 10, False),  # throughput 11% apart
        (windows((100, 1000), (105, 1020), (109, 1101)), 10, False),  # latency 10.1% apart
        (windows((50, 9000), (100, 1000), (105, 1020), (109, 1050)), 10, True),  # only the last three count
        (windows((100, 1000), (105, 1020), (109, 1050)), 5, False),
        (windows((100, 1000), (0, 0), (109, 1050)), 100, False),  # a window with nothing answered
        (windows((100, 1000), (190, 1900), (150, 1500)), 100, True),
    ],
)
def test_three_consecutive_windows_within_the_percentage(figures, percentage, stable):
    assert is_stable(figures, percentage) is stable


def test_percentiles_are_picked_as_perf_analyzer_picks_them():
    latencies_ns = [i * 1000 for i in range(1, 101)]  # 1..100 us
    summary = latency_summary(list(reversed(latencies_ns)), extra_percentile=75)
    # index round(p/100 * 99): p50 -> 50 (51 us), p90 -> 89 (90 us), p95 -> 94, p99 -> 98, p75 -> 74
    assert summary == {"avg": 50.5, "p50": 51.0, "p75": 75.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
    assert latency_summary([]) == {}
