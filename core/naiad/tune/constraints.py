"""The limits a user sets on `naiad tune`: a p99 latency budget, a throughput floor, a memory
ceiling. A concurrency step meets them or not; a candidate is only as good as its best step
that does."""

from __future__ import annotations

from dataclasses import dataclass

from .results import CandidateResult, Step

__all__ = ["Constraints"]


@dataclass(frozen=True, slots=True)
class Constraints:
    latency_budget_ms: float | None = None  # p99
    min_throughput: float | None = None  # inferences/s
    max_memory_mb: float | None = None

    def __post_init__(self) -> None:
        for name in ("latency_budget_ms", "min_throughput", "max_memory_mb"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be more than 0, got {value:g}")

    def within_budget(self, step: Step) -> bool:
        """The step answered without errors and within the p99 budget."""
        return step.errors == 0 and (self.latency_budget_ms is None or step.p99_ms <= self.latency_budget_ms)

    def within_memory(self, result: CandidateResult) -> bool:
        """A memory that is not known ("n/a") cannot break the ceiling."""
        return self.max_memory_mb is None or result.memory_mb is None or result.memory_mb <= self.max_memory_mb

    def violations(self, result: CandidateResult) -> list[str]:
        """Why a candidate meets no objective, in words for the report (empty when it does)."""
        if not result.loaded:
            return ["failed to load"]
        found = []
        if not self.within_memory(result):
            found.append(f"memory {result.memory_mb:.0f} MiB > {self.max_memory_mb:g} MiB")
        if not any(self.within_budget(step) for step in result.steps):
            found.append(
                f"no step with p99 <= {self.latency_budget_ms:g} ms"
                if self.latency_budget_ms is not None
                else "every step had errors"
            )
        if self.min_throughput is not None and not any(
            step.throughput >= self.min_throughput and step.errors == 0 for step in result.steps
        ):
            found.append(f"throughput < {self.min_throughput:g}/s")
        return found
