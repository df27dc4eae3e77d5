"""`PreciseTimer`: a one-shot wake-up on the event loop, to the microsecond.

The loop's own timers count whole milliseconds (uvloop rounds a shorter delay down to 0 and
spins the loop until it is due; asyncio rounds it up to 1 ms): far too coarse for a queue
delay of 100 us. A Linux timerfd watched as a reader wakes the loop when the time comes and
costs nothing in between. `PreciseTimer.create` returns None where there is no timerfd.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
from collections.abc import Callable

__all__ = ["PreciseTimer"]

_CLOCK_MONOTONIC = 1  # the clock of time.monotonic_ns
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("it_interval", _TimeSpec), ("it_value", _TimeSpec)]


class PreciseTimer:
    """Calls `fire` on the loop once the time last given to `set` has come."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, fd: int, settime: Callable[..., int], fire: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._settime = settime
        self._fire = fire
        self._spec = _ITimerSpec()
        self._due_ns = 0
        loop.add_reader(fd, self._expired)

    @classmethod
    def create(cls, loop: asyncio.AbstractEventLoop, fire: Callable[[], None]) -> PreciseTimer | None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | _TFD_CLOEXEC)
        except (OSError, AttributeError):  # no timerfd_create: not Linux
            return None
        if fd < 0:
            return None
        return cls(loop, fd, libc.timerfd_settime, fire)

    @property
    def due_ns(self) -> int:
        """When the timer fires (time.monotonic_ns's clock); 0 when it is not set."""
        return self._due_ns

    def set(self, due_ns: int) -> None:
        """Fire at `due_ns` (time.monotonic_ns's clock), or at once if that has passed;
        0 unsets the timer. Replaces any earlier setting."""
        spec = self._spec
        spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(due_ns, 1_000_000_000)
        if self._settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        self._due_ns = due_ns

    def _expired(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:  # set again, for later, after it became readable
            return
        self._due_ns = 0
        self._fire()

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
