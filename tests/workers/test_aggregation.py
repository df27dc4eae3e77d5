"""How the shares of several worker processes add up to one server's statistics and metrics."""

from __future__ import annotations

import math

from naiad.frontends.metrics.exposition import Family
from naiad.observability.statistics import ModelStatistics
from naiad.workers.aggregation import merge_families, merge_statistics


def _stats(name: str, successes: int, batch_sizes: list[int], last_ms: int) -> dict:
    stats = ModelStatistics(name, "1")
    for _ in range(successes):
        stats.record_success(1000)
    for size in batch_sizes:
        stats.record_execution(size, 1, 10, 20, 30)
    stats.last_inference_ms = last_ms
    return stats.to_dict()


def test_statistics_add_up_per_model_and_batch_size() -> None:
    merged = merge_statistics([[_stats("a", 3, [1, 4], 100)], [_stats("a", 2, [4, 8], 50), _stats("b", 1, [], 7)]])
    a, b = merged
    assert (a["name"], a["version"], b["name"]) == ("a", "1", "b")
    assert a["inference_stats"]["success"] == {"count": 5, "ns": 5000}
    assert a["execution_count"] == 4 and a["inference_count"] == 1 + 4 + 4 + 8
    assert a["last_inference"] == 100
    assert [(row["batch_size"], row["compute_infer"]["count"]) for row in a["batch_stats"]] == [(1, 1), (4, 2), (8, 1)]
    assert b["inference_stats"]["success"]["count"] == 1


def test_metric_families_add_counters_and_keep_worker_0_gauges() -> None:
    labels = (("model", "a"), ("version", "1"))

    def share(count: float, pending: float, cpu: float, quantile: float) -> list[Family]:
        success = Family("nv_inference_request_success", "", "counter", [("", labels, count)])
        waiting = Family("nv_inference_pending_request_count", "", "gauge", [("", labels, pending)])
        machine = Family("nv_cpu_utilization", "", "gauge", [("", (), cpu)])
        summary = Family(
            "nv_inference_request_summary_us",
            "",
            "summary",
            [("", labels + (("quantile", "0.5"),), quantile), ("_count", labels, count)],
        )
        return [success, waiting, machine, summary]

    only_peer = Family("custom_counter", "", "counter", [("", (), 2)])
    merged = {f.name: f for f in merge_families(share(3, 1, 0.5, math.nan), [share(4, 2, 0.9, 12.0) + [only_peer]])}
    assert merged["nv_inference_request_success"].samples == [("", labels, 7)]
    assert merged["nv_inference_pending_request_count"].samples == [("", labels, 3)]
    assert merged["nv_cpu_utilization"].samples == [("", (), 0.5)]
    assert merged["nv_inference_request_summary_us"].samples == [
        ("", labels + (("quantile", "0.5"),), 12.0),
        ("_count", labels, 7),
    ]
    assert merged["custom_counter"].samples == [("", (), 2)]
