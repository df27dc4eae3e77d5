"""Binding a listening TCP socket: the one place every server socket (HTTP, gRPC, metrics)
is made, so a port in use is the same clear error everywhere and SO_REUSEPORT means the same."""

from __future__ import annotations

import socket

__all__ = ["listen"]


def listen(
    host: str, port: int, *, reuse_port: bool = False, backlog: int = 2048, name: str = "server"
) -> socket.socket:
    """A non-blocking socket listening on host:port (port 0: one the kernel picks).

    With `reuse_port` (SO_REUSEPORT) several processes listen on the same port and the kernel
    spreads new connections over them (naiad's `--workers`, `--reuse-http-port`). When the
    address cannot be bound, OSError keeps the errno and says "`name` cannot listen on
    host:port"."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"{name} cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock
