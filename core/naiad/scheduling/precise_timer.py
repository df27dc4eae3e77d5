"""`PreciseTimer`: a one-shot wake-up on the event loop, to the microsecond.

The loop's own timers count whole milliseconds (uvloop rounds a shorter delay down to 0 and
spins the loop until it is due; asyncio rounds it up to 1 ms): far too coarse for a queue
delay of 100 us. A Linux timerfd watched as a reader wakes the loop when the time comes and
costs nothing in between. Every PreciseTimer of one loop shares one timerfd, set for the
earliest of their times, so a server with a thousand batching models holds one descriptor
per loop, not a thousand. `PreciseTimer.create` returns None where there is no timerfd.
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import itertools
import os
import time
from collections.abc import Callable

__all__ = ["PreciseTimer"]

_CLOCK_MONOTONIC = 1  # the clock of time.monotonic_ns
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("it_interval", _TimeSpec), ("it_value", _TimeSpec)]


class _LoopTimerFd:
    """One loop's timerfd and the timers waiting on it, earliest first."""

    # Each loop's, while a timer of that loop is open (the last to close removes it).
    _of_loop: dict[asyncio.AbstractEventLoop, _LoopTimerFd] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, settime: Callable[..., int]) -> None:
        self._loop = loop
        self._fd = fd
        self._settime = settime
        self._spec = _ITimerSpec()
        self._armed_ns = 0
        # (due, sequence, timer): a timer set again or unset leaves its old entry behind,
        # which is skipped when it comes up (its due time no longer matches the timer's).
        self._heap: list[tuple[int, int, PreciseTimer]] = []
        self._sequence = itertools.count()
        self._users = 0
        loop.add_reader(fd, self._expired)

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _LoopTimerFd | None:
        shared = cls._of_loop.get(loop)
        if shared is None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | _TFD_CLOEXEC)
            except (OSError, AttributeError):  # no timerfd_create: not Linux
                return None
            if fd < 0:
                return None
            shared = cls._of_loop[loop] = cls(loop, fd, libc.timerfd_settime)
        return shared

    def schedule(self, timer: PreciseTimer, due_ns: int) -> None:
        heapq.heappush(self._heap, (due_ns, next(self._sequence), timer))
        if not self._armed_ns or due_ns < self._armed_ns:
            self._arm(due_ns)

    def _arm(self, due_ns: int) -> None:
        """Set the timerfd for `due_ns` (0: unset it)."""
        spec = self._spec
        spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(due_ns, 1_000_000_000)
        if self._settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        self._armed_ns = due_ns

    def _expired(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:  # set again after it became readable: look at the heap anyway
            pass
        now = time.monotonic_ns()
        heap = self._heap
        due: list[PreciseTimer] = []
        while heap and heap[0][0] <= now:
            when, _, timer = heapq.heappop(heap)
            if timer.take_due(when):
                due.append(timer)
        # Left behind: entries of timers set again or unset, at most one per setting; drop
        # them once they are all that is left.
        while heap and heap[0][2].due_ns != heap[0][0]:
            heapq.heappop(heap)
        self._armed_ns = 0
        if heap:
            self._arm(heap[0][0])
        for timer in due:
            timer.fire()

    def acquire(self) -> None:
        self._users += 1

    def release(self) -> None:
        self._users -= 1
        if self._users == 0:
            del self._of_loop[self._loop]
            self._loop.remove_reader(self._fd)
            os.close(self._fd)


class PreciseTimer:
    """Calls `fire` on the loop once the time last given to `set` has come."""

    def __init__(self, shared: _LoopTimerFd, fire: Callable[[], None]) -> None:
        self._shared = shared
        self.fire = fire
        self._due_ns = 0
        shared.acquire()

    @classmethod
    def create(cls, loop: asyncio.AbstractEventLoop, fire: Callable[[], None]) -> PreciseTimer | None:
        shared = _LoopTimerFd.of(loop)
        return None if shared is None else cls(shared, fire)

    @property
    def due_ns(self) -> int:
        """When the timer fires (time.monotonic_ns's clock); 0 when it is not set."""
        return self._due_ns

    def set(self, due_ns: int) -> None:
        """Fire at `due_ns` (time.monotonic_ns's clock), or at once if that has passed;
        0 unsets the timer. Replaces any earlier setting."""
        self._due_ns = due_ns
        if due_ns:
            self._shared.schedule(self, due_ns)

    def take_due(self, when_ns: int) -> bool:
        """True, and unset, when the timer is set for `when_ns` (not set again since)."""
        if self._due_ns != when_ns:
            return False
        self._due_ns = 0
        return True

    def close(self) -> None:
        self._due_ns = 0
        self._shared.release()
