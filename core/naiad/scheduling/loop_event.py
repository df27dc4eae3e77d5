"""An asyncio.Event for one task that always waits on the same loop: a scheduler's dispatcher
waits on one between batches. asyncio.Event.wait looks the running loop up on every call, and
on CPython 3.11 that asks the kernel for the process id: a system call per batch, on the loop
that every request of the server goes through. This one looks it up once.
"""

from __future__ import annotations

import asyncio

__all__ = ["LoopEvent"]


class LoopEvent:
    """set / clear / wait as asyncio.Event's, for a single waiter, on the loop of its first wait."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if self._flag:
            return
        self._flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._flag = False

    async def wait(self) -> None:
        """Return once set (at once when it is)."""
        if self._flag:
            return
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
