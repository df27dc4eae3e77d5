"""`Clock`: where the batchers read the time and wait for a deadline.

Every batching rule is a rule about time: `max_queue_delay_microseconds`, a queue policy's
timeout, `max_sequence_idle_microseconds`. The dynamic and sequence batchers (and, through
the times they pass it, the priority queue's policies) read the time and set their wake-ups
only through a `Clock`, so a test can hand them one it moves by hand and check each rule to
the nanosecond, without waiting seconds of wall clock on a machine that may pause any
process for as long. `SystemClock`, the default, is the monotonic clock and the event
loop's own timers.

A job's `enqueued_ns` must be on the clock of the scheduler it is given to (a test that
drives a batcher with its own clock stamps the jobs it makes with it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

from .precise_timer import PreciseTimer

__all__ = ["Clock", "DeadlineTimer", "Cancellable", "SystemClock", "sleep_until"]


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class DeadlineTimer(Protocol):
    """A one-shot wake-up that is set again and again (as `PreciseTimer` is)."""

    @property
    def due_ns(self) -> int:
        """When it fires; 0 when it is not set."""
        ...

    def set(self, due_ns: int) -> None:
        """Fire at `due_ns` (at once if that has passed); 0 unsets it."""
        ...

    def close(self) -> None: ...


class Clock(Protocol):
    """What the batchers need of time: to read it, and to be woken at a deadline (on the
    loop's timers, or to the microsecond where a sub-millisecond queue delay needs it)."""

    def monotonic_ns(self) -> int:
        """Now, in nanoseconds of a clock that never goes back."""
        ...

    def call_at(self, when_ns: int, callback: Callable[[], None]) -> Cancellable:
        """Call `callback` on the running event loop once `when_ns` has come (soon, if it
        has passed already)."""
        ...

    def precise_timer(self, fire: Callable[[], None]) -> DeadlineTimer | None:
        """A timer that calls `fire` to the microsecond, or None where there is none (the
        caller then makes do with `call_at`, whose precision is the loop's)."""
        ...


class SystemClock:
    """The monotonic clock and the running event loop's timers."""

    # The builtin itself, not a method around it: the dynamic batcher reads the time a few
    # times per pass, and a Python frame for each would cost more than the reading.
    monotonic_ns = staticmethod(time.monotonic_ns)

    def call_at(self, when_ns: int, callback: Callable[[], None]) -> Cancellable:
        # Relative: the loop's own clock (uvloop's especially) need not be time.monotonic.
        delay_s = max(when_ns - time.monotonic_ns(), 0) / 1e9
        return asyncio.get_running_loop().call_later(delay_s, callback)

    def precise_timer(self, fire: Callable[[], None]) -> DeadlineTimer | None:
        return PreciseTimer.create(asyncio.get_running_loop(), fire)


async def sleep_until(clock: Clock, when_ns: int) -> None:
    """Wait until `when_ns` on `clock`."""
    woken = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    timer = clock.call_at(when_ns, wake)
    try:
        await woken
    finally:
        timer.cancel()
