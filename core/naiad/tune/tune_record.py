"""Everything one run of `naiad tune` found, as the reports and the summary read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .constraints import Constraints
from .objectives import Choice, best_latency, best_throughput, pareto_front
from .results import CandidateResult
from .space import SearchSpace

__all__ = ["TuneRecord"]


@dataclass(frozen=True, slots=True)
class TuneRecord:
    model: str
    server: str  # "naiad serve started by tune" or the URL of the user's server
    search: str  # quick | brute
    space: SearchSpace
    constraints: Constraints
    results: tuple[CandidateResult, ...]  # in the order they were measured
    seconds: float  # the whole run, wall clock
    measurement: str  # how each step was measured, in words
    # How many of the results came from the checkpoint rather than being measured now.
    resumed: int = 0

    @property
    def best_throughput(self) -> Choice | None:
        return best_throughput(self.results, self.constraints)

    @property
    def best_latency(self) -> Choice | None:
        return best_latency(self.results, self.constraints)

    @property
    def pareto(self) -> list[Choice]:
        return pareto_front(self.results)

    @property
    def failed(self) -> list[CandidateResult]:
        return [r for r in self.results if not r.loaded]

    @property
    def measured_seconds(self) -> float:
        """The seconds the candidates cost (reload, sweep, restarts), checkpointed ones included."""
        return sum(r.seconds for r in self.results)

    def to_json(self) -> dict[str, Any]:
        """tune.json: the record for programs (a CI job comparing runs, a script of its own)."""

        def choice(found: Choice | None) -> dict[str, Any] | None:
            if found is None:
                return None
            return {"candidate": found.result.candidate.as_dict(), "step": found.step.to_json()}

        constraints = self.constraints
        return {
            "model": self.model,
            "server": self.server,
            "search": self.search,
            "space": {d.name: list(d.values) for d in self.space.dimensions},
            "constraints": {
                "latency_budget_ms": constraints.latency_budget_ms,
                "min_throughput": constraints.min_throughput,
                "max_memory_mb": constraints.max_memory_mb,
            },
            "seconds": self.seconds,
            "measured_seconds": self.measured_seconds,
            "resumed": self.resumed,
            "best": {"throughput": choice(self.best_throughput), "latency": choice(self.best_latency)},
            "candidates": [result.to_json() for result in self.results],
        }
