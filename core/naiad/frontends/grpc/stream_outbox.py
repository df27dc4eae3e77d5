"""The messages one `ModelStreamInfer` call sends back, in Triton's order.

A stream's requests run concurrently, but a client of a model that is not decoupled reads
one answer per request and matches them up by position (Triton's QA sequence tests do):
those answers leave in the order their requests arrived, whichever finished first. A
decoupled model's responses leave as they come, as Triton sends them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["StreamOutbox", "Place"]

Message = TypeVar("Message")


class Place(Generic[Message]):
    """A request's place in the stream's order; its answer waits here until every request
    before it has been answered."""

    __slots__ = ("_messages", "filled", "sent", "_waiter")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self.filled = False
        self.sent = False  # its messages have left (they were queued for the stream)
        self._waiter: asyncio.Future[None] | None = None

    async def wait_sent(self) -> None:
        """Until this place's messages have left: a request counts as in flight until then,
        so answers held back behind a slow earlier request stay bounded too."""
        if not self.sent:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter


class StreamOutbox(Generic[Message]):
    """What the stream writes, in order; `get` returns None once `close` was called and
    everything before it left."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._places: deque[Place[Message]] = deque()

    def reserve(self) -> Place[Message]:
        """A place after every one reserved before (call in arrival order)."""
        place: Place[Message] = Place()
        self._places.append(place)
        return place

    def fill(self, place: Place[Message], messages: list[Message]) -> None:
        """The answer of `place` (empty for a request answered out of order, through
        `send_now`); it leaves once the places before it are filled."""
        place._messages = messages
        place.filled = True
        places = self._places
        while places and places[0].filled:
            first = places.popleft()
            for message in first._messages:
                self._queue.put_nowait(message)
            first.sent = True
            if first._waiter is not None and not first._waiter.done():
                first._waiter.set_result(None)

    def send_now(self, message: Message) -> None:
        """A message that keeps no place (a decoupled model's response)."""
        self._queue.put_nowait(message)

    def close(self) -> None:
        self._queue.put_nowait(None)

    async def get(self) -> Message | None:
        return await self._queue.get()
