"""LoopEvent, the dispatcher's wake-up: asyncio.Event's rules, with the running loop looked up
once (asyncio's own looks it up on each wait, a getpid system call on CPython 3.11)."""

from __future__ import annotations

import asyncio

from naiad.scheduling.loop_event import LoopEvent


def test_a_set_event_is_waited_for_at_once_until_cleared():
    async def go():
        event = LoopEvent()
        event.set()
        await asyncio.wait_for(event.wait(), 1)
        assert event.is_set()
        event.clear()
        waiting = asyncio.ensure_future(event.wait())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        asyncio.get_running_loop().call_soon(event.set)  # as a timer's callback sets it
        await asyncio.wait_for(waiting, 1)
        event.set()  # a second set changes nothing
        assert event.is_set()

    asyncio.run(go())


def test_a_cancelled_wait_leaves_the_event_usable():
    async def go():
        event = LoopEvent()
        waiting = asyncio.ensure_future(event.wait())
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        event.set()
        await asyncio.wait_for(event.wait(), 1)

    asyncio.run(go())


def test_the_running_loop_is_looked_up_once(monkeypatch):
    looked_up: list[int] = []
    real = asyncio.get_running_loop

    def counted() -> asyncio.AbstractEventLoop:
        looked_up.append(1)
        return real()

    async def go():
        event = LoopEvent()
        loop = asyncio.get_running_loop()
        monkeypatch.setattr(asyncio, "get_running_loop", counted)
        for _ in range(5):
            loop.call_soon(event.set)
            await event.wait()
            event.clear()
        monkeypatch.undo()

    asyncio.run(go())
    assert len(looked_up) == 1
