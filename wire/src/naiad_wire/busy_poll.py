"""Busy polling: an event loop polls for a short while instead of sleeping, when a message
is due within that while.

Waking a thread that sleeps on another CPU costs tens of microseconds on a virtual machine
(a socket round trip between two processes on the 2-vCPU machine of docs/performance.md:
66 us when each sleeps, 5 us when each polls), and a request to a Python model crosses
four such hand-offs: the client to the server, the server to the model's process and back,
the server to the client. Both ends of the middle two poll:
- the server's loop, while a batch awaited on it (a coroutine `execute`: a model process's)
  that usually takes less than the poll window runs, and for the window after its answers
  are sent (the client's next request is due). Batches that take longer than the window
  get no polling at all: the loop would only take CPU from the framework computing them.
  Nor do batches of an instance thread (a framework backend's): a polling loop would
  contend with that thread for the GIL. (naiad.scheduling.instance_runner)
- a model's process, for the window after it sends a batch's answers, when its last batch
  came within the window of the answers before it: the server's next batch is then due.
  A model whose batches come further apart sleeps between them. (naiad_backend_python)

A polling loop keeps a callback scheduled, so it waits in `epoll_wait` with a timeout of 0
and never sleeps. The callback yields the CPU at each turn, so a thread that shares the CPU
(a framework's, the other end) is not kept waiting.

`naiad serve --busy-poll-us` sets the window (`configure`) before any process of the server
starts, so every process it forks inherits it, and the Python backend hands it to each
model's process; 0 turns polling off.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref

__all__ = ["configure", "hold", "polling", "window_ns"]

# Off until configured: an embedding program's loop polls only when it asks to.
_window_ns = 0


class _Polling:
    """One loop's state (it holds no reference to the loop, which may be collected)."""

    __slots__ = ("until", "active")

    def __init__(self) -> None:
        self.until = 0
        self.active = False


_of_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Polling] = weakref.WeakKeyDictionary()


def configure(window_us: int) -> None:
    """Poll for `window_us` microseconds around short executions (0: never)."""
    global _window_ns
    if window_us < 0:
        raise ValueError(f"the busy-poll window must be 0 or more microseconds, not {window_us}")
    _window_ns = window_us * 1000


def window_ns() -> int:
    """The window in nanoseconds; 0 when polling is off."""
    return _window_ns


def hold(loop: asyncio.AbstractEventLoop) -> None:
    """Keep `loop` awake for the window from now (nothing when polling is off)."""
    if not _window_ns:
        return
    state = _of_loop.get(loop)
    if state is None:
        state = _of_loop[loop] = _Polling()
    state.until = time.monotonic_ns() + _window_ns
    if not state.active:
        state.active = True
        loop.call_soon(_poll, loop, state)


def polling(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop` is polling now."""
    state = _of_loop.get(loop)
    return state is not None and state.active


def _poll(loop: asyncio.AbstractEventLoop, state: _Polling) -> None:
    if time.monotonic_ns() < state.until:
        os.sched_yield()
        loop.call_soon(_poll, loop, state)
    else:
        state.active = False
