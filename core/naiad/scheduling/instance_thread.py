"""`InstanceThread`: the one thread an instance's synchronous `execute` runs on.

It does what a one-worker ThreadPoolExecutor driven by `run_in_executor` does, for about a
third of the CPU per batch (a round trip measured 15 us against 42 on the 2-core machine):
the work goes over a `queue.SimpleQueue` (C code, no Python-level lock or condition) and the
outcome straight to the awaiting asyncio future with one `call_soon_threadsafe`, with no
concurrent.futures.Future and no callback chaining the two in between. Each batch that does
not run on the loop pays this hop, so it is worth its own few lines.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..cpu_affinity import release_calling_thread

__all__ = ["InstanceThread"]

T = TypeVar("T")

# What the thread is handed: the caller's loop and future, and the call to make.
_Work = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class InstanceThread:
    """Runs functions one at a time, in order, on a thread of its own (started on first use)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    def run(self, function: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """`function(*args)` on the thread; the future has its result or its exception."""
        return self.run_on(asyncio.get_running_loop(), function, *args)

    def run_on(self, loop: asyncio.AbstractEventLoop, function: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """`run`, for a caller that knows its running loop `loop` (looking it up asks the
        kernel for the process id on CPython 3.11: a system call a batch)."""
        if self._closed:
            raise RuntimeError(f"instance thread '{self.name}' is closed")
        future: asyncio.Future[T] = loop.create_future()
        if self._thread is None:
            # A daemon: a thread left waiting for work must not keep the interpreter from
            # exiting (close() is what ends it in an orderly way).
            self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            self._thread.start()
        self._work.put((loop, future, function, args))
        return future

    def _serve(self) -> None:
        # Started by the event loop's thread, which may be pinned to one CPU: a framework's
        # execution (and the thread pool it starts from here) gets every CPU of the server.
        release_calling_thread()
        take = self._work.get
        while True:
            work = take()
            if work is None:
                return
            loop, future, function, args = work
            # Not holding the batch (and its tensors) while waiting for the next one.
            del work
            settle: Callable[[asyncio.Future[Any], Any], None]
            try:
                settle, outcome = _succeed, function(*args)
            except BaseException as exc:  # noqa: BLE001 - every failure belongs to the awaiting caller
                settle, outcome = _fail, exc
            del function, args
            try:
                loop.call_soon_threadsafe(settle, future, outcome)
            except RuntimeError:
                pass  # the loop is closed: nobody awaits this outcome any more
            del future, outcome

    def close(self) -> None:
        """Finish what was handed over, then end the thread; blocks until it has."""
        self._closed = True
        if self._thread is not None:
            self._work.put(None)
            self._thread.join()


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # the caller may have been cancelled meanwhile
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
