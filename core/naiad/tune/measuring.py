"""tune's measuring arm: one concurrency step of `naiad perf`'s engine (`naiad.loadgen.measure`)
against the server holding the candidate, as a `Step`.

`LoadResult` is the part of loadgen's `StepResult` tune reads, so the search does not depend on
the rest of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from .results import Step

__all__ = ["LoadResult", "MeasureAt", "step_from"]


class LoadResult(Protocol):
    @property
    def throughput(self) -> float: ...

    @property
    def latency_us(self) -> Mapping[str, float]: ...

    @property
    def errors(self) -> int: ...

    @property
    def stable(self) -> bool: ...


# Measures the server at one HTTP URL (HOST:PORT) at one concurrency.
MeasureAt = Callable[[str, int], Awaitable[LoadResult]]


def step_from(concurrency: int, result: LoadResult) -> Step:
    latency = result.latency_us
    return Step(
        concurrency=concurrency,
        throughput=float(result.throughput),
        p50_ms=float(latency.get("p50", 0.0)) / 1000,
        p99_ms=float(latency.get("p99", 0.0)) / 1000,
        avg_ms=float(latency.get("avg", 0.0)) / 1000,
        errors=int(result.errors),
        stable=bool(result.stable),
    )
