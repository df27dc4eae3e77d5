"""The messages between the server and its stub template (the process that forks model
processes): one JSON object per record of a `SOCK_SEQPACKET` socketpair, file descriptors
beside it as `SCM_RIGHTS`.

A record boundary is a message boundary, so a message and the descriptors it carries are
always received together and never split or merged; the socketpair has no name, so nothing
but the server that made it can reach the template.

server -> template
    ``{"op": "fork", "fd_flags": [...], "args": [...], "env": {...}, "cwd": "..."}`` with the
    stub's descriptors (its socket and both rings), one per entry of ``fd_flags``, in order.
template -> server
    ``{"op": "ready", "pid": N}`` once, when the template has imported what stubs import.
    ``{"op": "refused", "reason": "..."}`` instead of ready when it cannot fork safely.
    ``{"op": "forked", "pid": N}`` with one descriptor: a pidfd of the new process.
    ``{"op": "fork_failed", "error": "..."}`` when it could not.
    ``{"op": "exited", "pid": N, "code": C}`` when a process it forked ended: ``C`` as
    `subprocess.Popen.returncode` has it (the exit code, or minus the signal's number).
"""

from __future__ import annotations

import array
import json
import os
import socket
from typing import Any

__all__ = ["MAX_MESSAGE_BYTES", "MAX_FDS", "send_message", "receive_message"]

# A record must fit the socket's send buffer (the kernel's default is about 208 KiB). A fork
# request carries the stub's whole environment; one larger than this is not sent (the server
# spawns that stub instead).
MAX_MESSAGE_BYTES = 192 * 1024
# No message carries more descriptors than a fork request's three.
MAX_FDS = 4


def send_message(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = (), flags: int = 0) -> None:
    """Send one message (and its descriptors); ValueError when it is too large to send."""
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise ValueError(f"the message has {len(data)} bytes, more than {MAX_MESSAGE_BYTES}")
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary, flags)


def receive_message(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The next message and the descriptors that came with it (close-on-exec, owned by the
    caller); None when the peer has closed its end. OSError on a message that was cut short
    (its descriptors are closed)."""
    fd_bytes = array.array("i").itemsize * MAX_FDS
    data, ancillary, flags, _ = sock.recvmsg(MAX_MESSAGE_BYTES, socket.CMSG_SPACE(fd_bytes), socket.MSG_CMSG_CLOEXEC)
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            _close_quietly(fd)
        raise OSError("a message from the other side of the stub template's socket was cut short")
    if not data and not fds:
        return None
    return json.loads(data), list(fds)


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
