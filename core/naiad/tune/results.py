"""What tune records of one candidate: how its load went, the concurrency steps measured on it,
the server's memory, and how long it all took (the checkpoint stores these, one per line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .space import Candidate

__all__ = ["CandidateResult", "Step"]


@dataclass(frozen=True, slots=True)
class Step:
    """One concurrency measured on one candidate."""

    concurrency: int
    throughput: float  # inferences/s
    p50_ms: float
    p99_ms: float
    avg_ms: float
    errors: int = 0
    stable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "throughput": self.throughput,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "avg_ms": self.avg_ms,
            "errors": self.errors,
            "stable": self.stable,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Step:
        return Step(
            concurrency=int(data["concurrency"]),
            throughput=float(data["throughput"]),
            p50_ms=float(data["p50_ms"]),
            p99_ms=float(data["p99_ms"]),
            avg_ms=float(data["avg_ms"]),
            errors=int(data.get("errors", 0)),
            stable=bool(data.get("stable", True)),
        )


@dataclass(frozen=True, slots=True)
class CandidateResult:
    candidate: Candidate
    loaded: bool
    # The server's message when the candidate failed to load (or why it was not measured).
    message: str = ""
    steps: tuple[Step, ...] = field(default=())
    # PSS of the server's process tree after the sweep, MiB; None: not known ("n/a").
    memory_mb: float | None = None
    # Seconds spent on it: reload, sweep, restart of the server where its workers changed.
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate.as_dict(),
            "loaded": self.loaded,
            "message": self.message,
            "steps": [step.to_json() for step in self.steps],
            "memory_mb": self.memory_mb,
            "seconds": self.seconds,
        }

    @staticmethod
    def from_json(data: dict[str, Any], order: tuple[str, ...]) -> CandidateResult:
        memory = data.get("memory_mb")
        return CandidateResult(
            candidate=Candidate.from_dict(data["candidate"], order),
            loaded=bool(data["loaded"]),
            message=str(data.get("message", "")),
            steps=tuple(Step.from_json(step) for step in data.get("steps", [])),
            memory_mb=None if memory is None else float(memory),
            seconds=float(data.get("seconds", 0.0)),
        )
