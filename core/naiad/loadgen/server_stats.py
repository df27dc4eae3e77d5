"""`StatsSnapshot`: a model's cumulative statistics (the statistics extension's
`inference_stats` and `execution_count`); the difference of two is the server's share of
the requests between them, as a `ServerBreakdown`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .step_result import ServerBreakdown

__all__ = ["StatsSnapshot"]

_PHASES = ("success", "queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    success_count: int = 0
    success_ns: int = 0
    queue_count: int = 0
    queue_ns: int = 0
    compute_input_count: int = 0
    compute_input_ns: int = 0
    compute_infer_count: int = 0
    compute_infer_ns: int = 0
    compute_output_count: int = 0
    compute_output_ns: int = 0
    execution_count: int = 0

    @classmethod
    def read(cls, document: dict[str, Any]) -> StatsSnapshot:
        """The sum over every version the statistics document lists (one when a version
        was asked for)."""
        totals = dict.fromkeys((f.name for f in fields(cls)), 0)
        for model in document.get("model_stats", []):
            stats = model.get("inference_stats", {})
            for phase in _PHASES:
                duration = stats.get(phase, {})
                totals[f"{phase}_count"] += int(duration.get("count", 0))
                totals[f"{phase}_ns"] += int(duration.get("ns", 0))
            totals["execution_count"] += int(model.get("execution_count", 0))
        return cls(**totals)

    def breakdown_since(self, earlier: StatsSnapshot) -> ServerBreakdown:
        """Per request averages between `earlier` and this snapshot (each phase over its
        own count, as perf_analyzer divides them); overhead is the request time left over."""

        def average_us(phase: str) -> float:
            count = getattr(self, f"{phase}_count") - getattr(earlier, f"{phase}_count")
            total = getattr(self, f"{phase}_ns") - getattr(earlier, f"{phase}_ns")
            return total / count / 1000 if count > 0 else 0.0

        queue = average_us("queue")
        compute = [average_us(p) for p in ("compute_input", "compute_infer", "compute_output")]
        request = average_us("success")
        return ServerBreakdown(
            queue_us=queue,
            compute_input_us=compute[0],
            compute_infer_us=compute[1],
            compute_output_us=compute[2],
            overhead_us=max(0.0, request - queue - sum(compute)),
            requests=self.success_count - earlier.success_count,
            executions=self.execution_count - earlier.execution_count,
        )
