"""Keeps the server's long-lived objects out of the cyclic garbage collector's way.

Under load, objects that are alive during young collections (requests in flight) are
promoted, and every few hundred milliseconds that triggers a full collection, which walks
every tracked object in the process: modules, configs, protobuf descriptors, the models.
Measured at 64 clients: 25-35 ms pauses, which were the whole p99 (docs/performance.md).

`settle_soon()` is called after start-up and after every model load or unload: once things
are quiet it runs one full collection and then `gc.freeze()`, which moves every object
that survives into a permanent generation the collector no longer walks. Before that,
`gc.unfreeze()` returns the previous frozen set to the collector, so what an unload left
behind (a model's reference cycles included) is still freed.
"""

from __future__ import annotations

import asyncio
import gc

__all__ = ["settle", "settle_soon"]

# Loads come in bursts (start-up, a poll that changes several models): one settle after.
_DELAY_S = 0.5
# The loop a settle is scheduled on (one at a time; a loop closed before it ran is replaced).
_scheduled_on: asyncio.AbstractEventLoop | None = None


def settle() -> None:
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def settle_soon() -> None:
    """`settle()` once, a moment from now, on the running loop."""
    global _scheduled_on
    loop = asyncio.get_running_loop()
    if _scheduled_on is loop:
        return
    _scheduled_on = loop

    def run() -> None:
        global _scheduled_on
        if _scheduled_on is loop:
            _scheduled_on = None
        settle()

    loop.call_later(_DELAY_S, run)
