"""`ResponseIterator`: the responses of a decoupled BLS call, as they arrive.

Triton's models iterate it with a plain `for` loop, even inside `async def execute`, so it
must never depend on the model's event loop to be fed: responses land in a thread-safe
queue from whichever thread receives them. `async for` works too, without blocking the loop.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pb_utils import InferenceResponse

__all__ = ["ResponseIterator"]


class ResponseIterator:
    def __init__(self, wait_until: Callable[[Callable[[], bool]], object] | None = None) -> None:
        # Set by the bridge that feeds this iterator: asks the server to cancel the call.
        self.on_cancel: Callable[[], None] | None = None
        # How a blocking `next` waits for a response that is not there yet, when the thread
        # that waits must also fetch it (the stub's Channel.wait_until); else a plain wait.
        self._wait_until = wait_until
        self._queue: queue.Queue[tuple[InferenceResponse, bool]] = queue.Queue()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._complete = False  # the final response has been put

    def put(self, response: InferenceResponse, final: bool) -> None:
        """Called from any thread with each response; `final` marks the last."""
        self._queue.put((response, final))
        if final:
            self._complete = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def cancel(self) -> None:
        """Cancel the BLS request, as Triton's `cancel()`: the called model sees
        `is_cancelled()`, and the responses end (with a "request was cancelled" error unless
        the final one had already arrived)."""
        hook, self.on_cancel = self.on_cancel, None
        if hook is not None and not self._complete:
            hook()

    def __iter__(self) -> ResponseIterator:
        return self

    def __next__(self) -> InferenceResponse:
        if self._done:
            raise StopIteration
        if self._wait_until is not None:
            self._wait_until(lambda: not self._queue.empty())
        response, final = self._queue.get()
        self._done = final
        return response

    async def first_arrived(self) -> ResponseIterator:
        """Wait, without blocking the loop, until the first response has arrived. As Triton's
        `async_exec` (which runs the call on another thread): every coroutine of the model
        sends its request before any iterates with a plain `for`, which blocks the loop."""
        while self._queue.empty():
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        return self

    async def complete(self) -> ResponseIterator:
        """Wait until every response has arrived: for a caller that will then iterate with a
        plain `for` on the very loop that produces them (inline execution)."""
        while not self._complete:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        return self

    def __aiter__(self) -> ResponseIterator:
        return self

    async def __anext__(self) -> InferenceResponse:
        if self._done:
            raise StopAsyncIteration
        while True:
            try:
                response, final = self._queue.get_nowait()
                break
            except queue.Empty:
                # put() wakes us through the loop, so a response that lands before we
                # wait is still seen: _wake runs only once we await.
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
        self._done = final
        return response
