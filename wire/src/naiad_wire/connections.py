"""What naiad's own HTTP/1.1 and HTTP/2 servers share about ending connections: a close that
does not lose the last answer, and a drain of every connection at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Collection
from typing import Protocol

__all__ = ["Connection", "close_lingering", "reset", "stop_serving"]

# How long a closing connection keeps discarding the peer's input (see close_lingering).
_LINGER_S = 1.0


class Connection(Protocol):
    lost: asyncio.Future[None]  # done once the transport is gone

    def shutdown(self) -> None:
        """Take no new requests; close once the ones in progress are answered."""

    def move_on(self) -> None:
        """Have the client connect again, losing nothing (balance.py spreads connections
        anew that way)."""

    def abort(self) -> None: ...


def close_lingering(transport: asyncio.Transport) -> None:
    """Close once what was written has left. The write side closes first, and the caller
    discards what the peer still sends for a moment: closing with unread input makes the
    kernel reset the connection, and the peer may lose the answer written last (a 400, a
    GOAWAY)."""
    # Asked of the transport itself: uvloop's do not subclass asyncio.WriteTransport.
    if transport.can_write_eof():
        transport.write_eof()
        asyncio.get_running_loop().call_later(_LINGER_S, transport.close)
    else:
        transport.close()


# SO_LINGER on, with no time to linger: close() resets the connection.
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)


def reset(transport: asyncio.Transport) -> None:
    """Drop a connection at once, with a reset, and what it buffers. A plain abort closes the
    socket gracefully: with its answer unsent to a client that reads nothing, the kernel keeps
    it (and the unsent bytes) for minutes, trying to deliver, and the client never learns."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
    transport.abort()


# While stopping, how often the connections are looked at again for ones that came in since
# (passed from another process that had decided to before this one stopped).
_RECHECK_S = 0.1


async def stop_serving(
    listener: asyncio.AbstractServer | None, connections: Collection[Connection], grace_s: float
) -> None:
    """Stop listening, let every connection finish what it is answering for up to
    `grace_s` (one that arrives meanwhile too), then abort the rest."""
    if listener is not None:
        listener.close()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    shut: set[int] = set()
    while True:
        for connection in list(connections):
            if id(connection) not in shut:
                shut.add(id(connection))
                connection.shutdown()
        left = deadline - loop.time()
        pending = [connection.lost for connection in connections]
        if not pending or left <= 0:
            break
        await asyncio.wait(pending, timeout=min(_RECHECK_S, left), return_when=asyncio.FIRST_COMPLETED)
    for connection in list(connections):
        connection.abort()
