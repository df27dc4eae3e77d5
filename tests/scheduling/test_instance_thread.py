"""InstanceThread: the hand-over of synchronous batches to an instance's own thread."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from naiad.scheduling.instance_thread import InstanceThread


def test_work_runs_in_order_on_one_named_thread_and_results_come_back():
    seen: list[tuple[int, str]] = []

    def work(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * i

    async def go():
        lane = InstanceThread("naiad-m_0")
        try:
            results = await asyncio.gather(*(lane.run(work, i) for i in range(50)))
        finally:
            lane.close()
        return results

    results = asyncio.run(go())
    assert results == [i * i for i in range(50)]
    assert [i for i, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {"naiad-m_0"}
    assert threading.current_thread().name not in {name for _, name in seen}


def test_an_exception_reaches_the_caller_and_the_thread_keeps_serving():
    def fail() -> None:
        raise ValueError("model broke")

    async def go():
        lane = InstanceThread("naiad-m_0")
        try:
            with pytest.raises(ValueError, match="model broke"):
                await lane.run(fail)
            return await lane.run(lambda: "still here")
        finally:
            lane.close()

    assert asyncio.run(go()) == "still here"


def test_a_caller_cancelled_while_its_work_runs_leaves_no_error_behind():
    """The thread finishes the work anyway; settling the cancelled future must not raise
    InvalidStateError in the loop (which logs 'Exception in callback')."""
    started = threading.Event()
    loop_errors: list[dict] = []

    def slow() -> str:
        started.set()
        time.sleep(0.1)
        return "late"

    async def go():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
        lane = InstanceThread("naiad-m_0")
        try:
            waiting = asyncio.ensure_future(lane.run(slow))
            await asyncio.to_thread(started.wait, 5)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            return await lane.run(lambda: "next")
        finally:
            lane.close()

    assert asyncio.run(go()) == "next"
    assert loop_errors == []


def test_close_finishes_the_work_handed_over_then_refuses_more():
    done: list[int] = []

    def work(i: int) -> None:
        time.sleep(0.01)
        done.append(i)

    async def go():
        lane = InstanceThread("naiad-m_0")
        futures = [lane.run(work, i) for i in range(5)]
        lane.close()  # blocks until the five have run
        assert done == [0, 1, 2, 3, 4]
        await asyncio.gather(*futures)
        with pytest.raises(RuntimeError, match="closed"):
            lane.run(work, 5)

    asyncio.run(go())


def test_an_unused_thread_is_never_started_and_closes_at_once():
    before = threading.active_count()
    lane = InstanceThread("naiad-m_0")
    assert threading.active_count() == before
    lane.close()


def test_work_finishing_after_its_loop_closed_is_dropped_quietly(monkeypatch):
    escaped: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    release = threading.Event()
    lane = InstanceThread("naiad-m_0")

    async def go():
        lane.run(release.wait, 5)

    asyncio.run(go())  # the loop closes with the work still running
    release.set()
    lane.close()
    assert lane._thread is not None and not lane._thread.is_alive()
    assert escaped == [], "settling the future of a closed loop raised in the thread"
