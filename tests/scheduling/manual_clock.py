"""`ManualClock`: a `naiad.scheduling.clock.Clock` that moves only when a test moves it.

A batcher given one reads its time and sets its wake-ups here, so a test checks a batching
rule at the exact nanosecond it is about (a queue delay's end, a timeout, an idle limit)
and waits no wall clock for it. Wake-ups run on the event loop, in time order, each
followed by turns of the loop that let the batcher act on it before time moves on.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

__all__ = ["ManualClock", "settle"]

# Turns of the loop after which the batchers and the test's coroutine model have done what
# a wake-up or an arrival sets off (a dispatch pass, an execution, a delivery takes a few);
# nothing here runs in threads, so nothing is left for later.
_SETTLE_TURNS = 50


async def settle() -> None:
    """Let every task on the loop run until it waits for something new."""
    for _ in range(_SETTLE_TURNS):
        await asyncio.sleep(0)


class _Call:
    """A wake-up of `call_at`, cancellable as the loop's handles are."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback: Callable[[], None] | None = callback

    def cancel(self) -> None:
        self.callback = None


class _Timer:
    """The clock's `precise_timer`: a wake-up set again and again."""

    def __init__(self, clock: ManualClock, fire: Callable[[], None]) -> None:
        self._clock = clock
        self._fire = fire
        self._call: _Call | None = None
        self._due_ns = 0

    @property
    def due_ns(self) -> int:
        return self._due_ns

    def set(self, due_ns: int) -> None:
        if self._call is not None:
            self._call.cancel()
            self._call = None
        self._due_ns = due_ns
        if due_ns:
            self._call = self._clock.call_at(due_ns, self._fired)

    def _fired(self) -> None:
        self._due_ns = 0
        self._call = None
        self._fire()

    def close(self) -> None:
        self.set(0)


class ManualClock:
    """Starts at `start_ns` and stands still until `advance`d."""

    def __init__(self, start_ns: int = 1_000_000_000_000) -> None:
        self._now = start_ns
        self._calls: list[tuple[int, int, _Call]] = []
        self._order = itertools.count()

    def monotonic_ns(self) -> int:
        return self._now

    def call_at(self, when_ns: int, callback: Callable[[], None]) -> _Call:
        call = _Call(callback)
        if when_ns <= self._now:
            asyncio.get_running_loop().call_soon(self._run, call)
        else:
            heapq.heappush(self._calls, (when_ns, next(self._order), call))
        return call

    def precise_timer(self, fire: Callable[[], None]) -> _Timer:
        return _Timer(self, fire)

    def pending(self) -> list[int]:
        """The times of the wake-ups set and not cancelled, earliest first."""
        return sorted(when for when, _, call in self._calls if call.callback is not None)

    async def advance(self, ns: int) -> None:
        """Move `ns` forward, running each wake-up due on the way at its own time."""
        if ns < 0:
            raise ValueError(f"a monotonic clock cannot go back ({ns} ns)")
        target = self._now + ns
        await settle()
        while self._calls and self._calls[0][0] <= target:
            when, _, call = heapq.heappop(self._calls)
            self._now = when
            self._run(call)
            await settle()
        self._now = target
        await settle()

    @staticmethod
    def _run(call: _Call) -> None:
        callback, call.callback = call.callback, None
        if callback is not None:
            callback()
