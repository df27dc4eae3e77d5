"""The concurrencies measured on one candidate: 1, 2, 4, ... doubling until two doublings in a
row added no throughput, the p99 left the budget or the server answered with errors, up to a
limit. The search sizes the sweep this way rather than by a fixed list, so a candidate that
saturates at 4 clients costs three steps, not seven."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .results import Step

__all__ = ["DEFAULT_SWEEP_GAIN", "concurrency_sweep"]

# A doubling that adds less than this share of throughput means the server is saturated.
DEFAULT_SWEEP_GAIN = 0.05
PATIENCE = 2


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
    concurrency, best, flat = 1, 0.0, 0
    while concurrency <= max_concurrency:
        step = await measure_at(concurrency)
        steps.append(step)
        if step.errors or (latency_budget_ms is not None and step.p99_ms > latency_budget_ms):
            break
        # Saturated after two doublings in a row that did not pay: one alone may be a noisy
        # window, and a batching candidate often gains little from 1 to 2 clients and much
        # from 2 to 8.
        flat = flat + 1 if step.throughput < best * (1 + min_gain) else 0
        best = max(best, step.throughput)
        if flat == PATIENCE:
            break
        concurrency *= 2
    return tuple(steps)
