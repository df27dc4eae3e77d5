"""Keeps the server's long-lived objects out of the cyclic garbage collector's way.

Under load, objects that are alive during young collections (requests in flight) are
promoted, and every few hundred milliseconds that triggers a full collection, which walks
every tracked object in the process: modules, configs, protobuf descriptors, the models.
Measured at 64 clients: 25-35 ms pauses, which were the whole p99 (docs/performance.md).

`HeapSettler.settle_soon()` is called after every model load or unload: once things
are quiet it runs one full collection and then `gc.freeze()`, which moves every object
that survives into a permanent generation the collector no longer walks. Before that,
`gc.unfreeze()` returns the previous frozen set to the collector, so what an unload left
behind (a model's reference cycles included) is still freed.
"""

from __future__ import annotations

import asyncio
import gc

__all__ = ["HeapSettler", "settle"]

# Loads come in bursts (start-up, a poll that changes several models): one settle after.
_DELAY_S = 0.5


def settle() -> None:
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class HeapSettler:
    """Runs `settle()` a moment after it is first asked, once for however many ask in
    between. The model manager owns one; at most one settle is pending, on the loop that
    asked (a loop closed before it ran is replaced by the next one that asks)."""

    def __init__(self, delay_s: float = _DELAY_S) -> None:
        self.delay_s = delay_s
        self._scheduled_on: asyncio.AbstractEventLoop | None = None

    def settle_soon(self) -> None:
        """`settle()` once, a moment from now, on the running loop."""
        loop = asyncio.get_running_loop()
        if self._scheduled_on is loop:
            return
        self._scheduled_on = loop

        def run() -> None:
            if self._scheduled_on is loop:
                self._scheduled_on = None
            settle()

        loop.call_later(self.delay_s, run)
