"""Frames written during one turn of the event loop leave in one system call.

Between two processes of one server under load, many messages are produced in one turn (the
responses of one batch, the requests parsed from one read of many connections); writing each
at once costs a `write` and, on the other side, a wake-up and a `read` per message. Collected
and written together at the end of the turn, they cost one of each; a lone message waits only
for the turn to end.
"""

from __future__ import annotations

import asyncio

__all__ = ["CoalescedWrites"]


class CoalescedWrites:
    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._frames: list[bytes] = []

    def write(self, frame: bytes) -> None:
        if not self._frames:
            self._loop.call_soon(self.flush)
        self._frames.append(frame)

    def flush(self) -> None:
        frames, self._frames = self._frames, []
        if frames and not self._transport.is_closing():
            self._transport.writelines(frames)
