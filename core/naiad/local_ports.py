"""A free TCP port on 127.0.0.1, for a server this process is about to start (tune's
servers, the test servers of `naiad.testing`). Another process can take it before the
server binds it: whoever starts the server checks that it did."""

from __future__ import annotations

import socket

__all__ = ["PORT_TAKEN", "free_port"]

# What a server's log says (lowercased) when another process took its port first.
PORT_TAKEN = "address already in use"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
