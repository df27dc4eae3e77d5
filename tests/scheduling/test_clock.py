"""The clock the batchers read (scheduling/clock.py), and the manual one tests move.

The system clock's wake-ups are checked for what the batchers rely on: never before their
time (a lower bound, which no loaded machine can break), and never after a cancel."""

from __future__ import annotations

import asyncio

import pytest
from manual_clock import ManualClock

from naiad.scheduling.clock import SystemClock, sleep_until

MS = 1_000_000


def test_a_system_wake_up_never_comes_before_its_time():
    async def go():
        clock = SystemClock()
        due = clock.monotonic_ns() + 20 * MS
        woken: list[int] = []
        clock.call_at(due, lambda: woken.append(clock.monotonic_ns()))
        await asyncio.wait_for(sleep_until(clock, due + 5 * MS), 30)
        assert len(woken) == 1 and woken[0] >= due
        assert clock.monotonic_ns() >= due + 5 * MS

    asyncio.run(go())


def test_a_cancelled_system_wake_up_never_comes():
    async def go():
        clock = SystemClock()
        woken: list[int] = []
        clock.call_at(clock.monotonic_ns() + 5 * MS, lambda: woken.append(1)).cancel()
        await sleep_until(clock, clock.monotonic_ns() + 20 * MS)
        assert woken == []

    asyncio.run(go())


def test_the_manual_clock_runs_wake_ups_in_time_order_each_at_its_own_time():
    async def go():
        clock = ManualClock(start_ns=1000)
        seen: list[tuple[str, int]] = []
        clock.call_at(1030, lambda: seen.append(("c", clock.monotonic_ns())))
        clock.call_at(1010, lambda: seen.append(("a", clock.monotonic_ns())))
        cancelled = clock.call_at(1015, lambda: seen.append(("cancelled", clock.monotonic_ns())))
        timer = clock.precise_timer(lambda: seen.append(("timer", clock.monotonic_ns())))
        timer.set(1020)
        cancelled.cancel()
        assert clock.pending() == [1010, 1020, 1030]
        await clock.advance(25)
        assert seen == [("a", 1010), ("timer", 1020)] and clock.monotonic_ns() == 1025
        assert timer.due_ns == 0
        # A wake-up whose time has passed comes on the next turn of the loop.
        clock.call_at(1000, lambda: seen.append(("late", clock.monotonic_ns())))
        await clock.advance(5)
        assert seen[2:] == [("late", 1025), ("c", 1030)]
        with pytest.raises(ValueError, match="cannot go back"):
            await clock.advance(-1)

    asyncio.run(go())
