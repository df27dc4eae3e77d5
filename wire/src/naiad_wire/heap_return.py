"""Gives the memory of large request bodies back to the system once they are let go.

A body arrives in pieces of up to a few hundred KiB, and glibc serves pieces that size from its
heap, between the small objects allocated meanwhile. Freed, the pieces leave holes that glibc
keeps: eight uploads stalled after 40 MiB left the server 173 MiB larger after their clients
had gone (docs/reliability.md), and a 40 MiB allocation pattern of the kind shrank from 249 to
47 MiB on `malloc_trim(0)`, which hands the free pages in the heap's middle back as well. So
once enough request bytes have been let go, a trim runs a moment later (one for a burst of
releases). Where the C library is not glibc this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["HeapReturn"]

# Bytes let go before a trim is worth its cost (it walks the heap: about a millisecond per
# hundred MiB), and how long after the release that crossed it: the rest of a burst first.
TRIM_AFTER_BYTES = 32 * 1024 * 1024
TRIM_DELAY_S = 0.5
# Only bodies this large count: smaller ones' holes are filled again by the next requests.
LARGE_BODY_BYTES = 1024 * 1024


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


class HeapReturn:
    """Counts the request bytes let go and trims the heap once enough have been."""

    def __init__(self, after_bytes: int = TRIM_AFTER_BYTES, delay_s: float = TRIM_DELAY_S) -> None:
        self.after_bytes = after_bytes
        self.delay_s = delay_s
        self.trims = 0
        self._released = 0
        self._scheduled = False

    def released(self, size: int) -> None:
        """The pieces of a body of `size` bytes were let go (call on the event loop)."""
        if size < LARGE_BODY_BYTES:
            return
        self._released += size
        if self._released >= self.after_bytes and not self._scheduled and _TRIM is not None:
            self._scheduled = True
            asyncio.get_running_loop().call_later(self.delay_s, self._trim)

    def _trim(self) -> None:
        self._scheduled = False
        self._released = 0
        if _TRIM is not None:
            _TRIM(0)
            self.trims += 1
