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
_scheduled: set[asyncio.AbstractEventLoop] = set()


def settle() -> None:
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def settle_soon() -> None:
    """`settle()` once, a moment from now, on the running loop."""
    loop = asyncio.get_running_loop()
    if loop in _scheduled:
        return
    _scheduled.add(loop)

    def run() -> None:
        _scheduled.discard(loop)
        settle()

    loop.call_later(_DELAY_S, run)
