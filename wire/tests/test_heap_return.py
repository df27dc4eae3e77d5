"""naiad_wire.heap_return: the heap is trimmed once enough large bodies have been let go, once
per burst, and never for small ones."""

from __future__ import annotations

import asyncio

from naiad_wire import heap_return
from naiad_wire.heap_return import LARGE_BODY_BYTES, HeapReturn


def test_a_trim_follows_a_burst_of_large_releases_once_and_small_ones_never():
    async def go() -> None:
        heap = HeapReturn(after_bytes=4 * LARGE_BODY_BYTES, delay_s=0.05)
        for _ in range(100):
            heap.released(LARGE_BODY_BYTES - 1)  # small bodies: their holes are reused
        await asyncio.sleep(0.1)
        assert heap.trims == 0
        for _ in range(12):  # a burst: three times the threshold, one trim
            heap.released(LARGE_BODY_BYTES)
        await asyncio.sleep(0.1)
        assert heap.trims == (1 if heap_return._TRIM is not None else 0)
        heap.released(LARGE_BODY_BYTES)  # the count starts again after a trim
        await asyncio.sleep(0.1)
        assert heap.trims == (1 if heap_return._TRIM is not None else 0)

    asyncio.run(go())


def test_glibc_trim_is_found_here():
    # The machines naiad is tested and deployed on run glibc: the trim must not silently be off.
    assert heap_return._TRIM is not None
