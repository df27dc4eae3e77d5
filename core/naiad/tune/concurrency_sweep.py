"""The concurrencies measured on one candidate: 1, 2, 4, ... doubling while the throughput
still grows, the p99 stays within the budget and the server answers without errors, up to a
limit. The search sizes the sweep this way rather than by a fixed list, so a candidate that
saturates at 4 clients costs three steps, not seven."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .results import Step

__all__ = ["DEFAULT_SWEEP_GAIN", "concurrency_sweep"]

# A doubling that adds less than this share of throughput means the server is saturated.
DEFAULT_SWEEP_GAIN = 0.05


async def concurrency_sweep(
    measure_at: Callable[[int], Awaitable[Step]],
    *,
    max_concurrency: int,
    latency_budget_ms: float | None = None,
    min_gain: float = DEFAULT_SWEEP_GAIN,
) -> tuple[Step, ...]:
    if max_concurrency < 1:
        raise ValueError(f"the maximum concurrency must be at least 1, got {max_concurrency}")
    steps: list[Step] = []
    concurrency = 1
    while concurrency <= max_concurrency:
        step = await measure_at(concurrency)
        steps.append(step)
        if step.errors or (latency_budget_ms is not None and step.p99_ms > latency_budget_ms):
            break
        if len(steps) > 1 and step.throughput < steps[-2].throughput * (1 + min_gain):
            break
        concurrency *= 2
    return tuple(steps)
