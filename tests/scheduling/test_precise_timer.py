"""PreciseTimer: a wake-up on the event loop to the microsecond, not the millisecond of the
loop's own timers. Bounds are one-sided (never early); no assertion is about speed."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from naiad.scheduling.precise_timer import PreciseTimer

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="timerfd is Linux's")


def run(loop_kind: str, coro_fn):
    if loop_kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        return uvloop.run(coro_fn())
    return asyncio.run(coro_fn())


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_fires_once_its_time_has_come_and_not_before(loop_kind):
    async def go():
        fired: list[int] = []
        timer = PreciseTimer.create(asyncio.get_running_loop(), lambda: fired.append(time.monotonic_ns()))
        assert timer is not None
        try:
            # 300 us: below the loop timers' millisecond, which would fire it at once (uvloop)
            # or 1 ms late (asyncio).
            due = time.monotonic_ns() + 300_000
            timer.set(due)
            assert timer.due_ns == due
            while not fired:
                await asyncio.sleep(0.0001)
            assert len(fired) == 1 and fired[0] >= due
            assert timer.due_ns == 0
            await asyncio.sleep(0.01)
            assert len(fired) == 1, "a one-shot timer fired twice"
        finally:
            timer.close()

    run(loop_kind, go)


def test_setting_again_replaces_the_earlier_time_and_zero_unsets_it():
    async def go():
        fired: list[str] = []
        loop = asyncio.get_running_loop()
        timer = PreciseTimer.create(loop, lambda: fired.append("fired"))
        assert timer is not None
        try:
            timer.set(time.monotonic_ns() + 1_000_000)
            later = time.monotonic_ns() + 30_000_000
            timer.set(later)
            await asyncio.sleep(0.01)
            assert fired == [], "the replaced, earlier time fired"
            while not fired:
                await asyncio.sleep(0.001)
            assert time.monotonic_ns() >= later
            timer.set(time.monotonic_ns() + 1_000_000)
            timer.set(0)
            assert timer.due_ns == 0
            await asyncio.sleep(0.02)
            assert fired == ["fired"], "an unset timer fired"
            # A time already past fires at once.
            timer.set(1)
            await asyncio.sleep(0.01)
            assert fired == ["fired", "fired"]
        finally:
            timer.close()

    asyncio.run(go())


def test_set_after_it_became_readable_does_not_fire_the_old_time():
    async def go():
        fired: list[str] = []
        timer = PreciseTimer.create(asyncio.get_running_loop(), lambda: fired.append("fired"))
        assert timer is not None
        try:
            timer.set(time.monotonic_ns() + 100_000)
            time.sleep(0.002)  # expired while the loop was not looking
            timer.set(time.monotonic_ns() + 60_000_000)
            await asyncio.sleep(0.01)
            assert fired == []
        finally:
            timer.close()

    asyncio.run(go())


def test_the_timers_of_one_loop_share_one_descriptor_and_each_fires_at_its_own_time():
    async def go():
        loop = asyncio.get_running_loop()
        before = len(os.listdir("/proc/self/fd"))
        fired: list[tuple[int, int]] = []
        timers = []
        for i in range(50):
            timer = PreciseTimer.create(loop, lambda i=i: fired.append((i, time.monotonic_ns())))
            assert timer is not None
            timers.append(timer)
        assert len(os.listdir("/proc/self/fd")) - before == 1
        start = time.monotonic_ns()
        due = {i: start + (50 - i) * 200_000 for i in range(50)}  # the last created fires first
        for i, timer in enumerate(timers):
            timer.set(due[i] + 5_000_000)  # set, then set again: only the second time counts
            timer.set(due[i])
        timers[7].set(0)  # and one is unset
        while len(fired) < 49:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.02)
        assert sorted(i for i, _ in fired) == [i for i in range(50) if i != 7], "a timer fired twice, or not at all"
        assert all(at >= due[i] for i, at in fired), "a timer fired early"
        assert [i for i, _ in fired] == sorted((i for i, _ in fired), reverse=True)
        for timer in timers:
            timer.close()
        assert len(os.listdir("/proc/self/fd")) == before

    asyncio.run(go())
