"""Says in the log that a slow load is still under way.

A framework load (a large ONNX graph, a TensorRT engine, a Python model's `initialize`) can
take minutes; without a line between "loading: m:1" and its outcome, a server that is busy
looks like a server that hangs.
"""

from __future__ import annotations

import asyncio
import logging
import time

__all__ = ["PROGRESS_INTERVAL_S", "report_while_loading"]

log = logging.getLogger("naiad.models")

# How often a load that is still going says so; the first line comes after this long too,
# so a quick load writes none.
PROGRESS_INTERVAL_S = 5.0


async def report_while_loading(name: str, interval: float = PROGRESS_INTERVAL_S) -> None:
    """Log "still loading NAME (N s)" every `interval` seconds until cancelled."""
    started = time.monotonic()
    while True:
        await asyncio.sleep(interval)
        log.info("still loading %s (%d s)", name, round(time.monotonic() - started))
