"""The control plane of `naiad serve --workers N`: how its processes ask each other things.

Each worker listens on its own Unix socket, `<dir>/<index>.sock`, and the model home on
`<dir>/home-control.sock`, in a directory only the server's user can enter (worker 0 creates
it mode 0700); each answers calls in threads of its own: a call never needs the event loop
of the process that answers unless the operation itself runs there (a change to trace
settings), so two processes that call each other at the same moment cannot deadlock.

A message is a 4-byte big-endian length and a pickled Python object: the peers are
copies of this very program started by worker 0, so the socket's permissions are the
trust boundary, as for any Unix socket of one user; nothing from the network reaches a
socket of the control plane. A call is `(operation, arguments)`; its answer is
`(True, result)` or `(False, (error code name, message))`.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import socketserver
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ErrorCode, NaiadError

__all__ = ["ControlServer", "Peer", "PeerUnreachable", "Handler", "socket_path"]

log = logging.getLogger("naiad.workers")

_LENGTH = struct.Struct("!I")
# A message above this is a bug (model uploads are bounded by the frontends far below it).
_MAX_MESSAGE = 1 << 31

# operation name -> function of the arguments; raises NaiadError for a refusal.
Handler = Callable[..., Any]


def socket_path(directory: str | Path, index: int) -> str:
    return os.path.join(directory, f"{index}.sock")


def _send(sock: socket.socket, value: object) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_LENGTH.pack(len(payload)) + payload)


def _receive_exactly(sock: socket.socket, size: int) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            return None
        got += n
    return bytes(buffer)


def _receive(sock: socket.socket) -> Any:
    """The next message, or raises EOFError when the peer closed the connection."""
    header = _receive_exactly(sock, _LENGTH.size)
    if header is None:
        raise EOFError
    (size,) = _LENGTH.unpack(header)
    if size >= _MAX_MESSAGE:
        raise EOFError
    payload = _receive_exactly(sock, size)
    if payload is None:
        raise EOFError
    return pickle.loads(payload)


class ControlServer:
    """Answers the calls of peers on this worker's socket, one thread per connection."""

    def __init__(self, path: str, handlers: dict[str, Handler]) -> None:
        self.path = path
        self.handlers = handlers

        class _Connection(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                while True:
                    try:
                        operation, arguments = _receive(sock)
                    except (EOFError, OSError):
                        return
                    answer = _answer(handlers, operation, arguments)
                    try:
                        _send(sock, answer)
                    except OSError:
                        return  # the caller went away
                    except (pickle.PicklingError, TypeError, AttributeError) as exc:
                        _send(
                            sock,
                            (False, (ErrorCode.INTERNAL.name, f"{operation}: the answer could not be sent: {exc}")),
                        )

        class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        try:
            os.unlink(path)  # left by a worker of the same index that was killed
        except FileNotFoundError:
            pass
        self._server = _Server(path, _Connection)
        os.chmod(path, 0o600)
        self._thread = threading.Thread(target=self._server.serve_forever, name="naiad-control-plane", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _answer(handlers: dict[str, Handler], operation: str, arguments: tuple[Any, ...]) -> tuple[bool, Any]:
    handler = handlers.get(operation)
    if handler is None:
        return False, (ErrorCode.INTERNAL.name, f"control plane: unknown operation '{operation}'")
    try:
        return True, handler(*arguments)
    except NaiadError as exc:
        return False, (exc.code.name, exc.message)
    except Exception as exc:  # noqa: BLE001 - the caller gets the failure, this worker keeps serving
        log.exception("control plane: '%s' failed", operation)
        return False, (ErrorCode.INTERNAL.name, f"{operation} failed: {type(exc).__name__}: {exc}")


class PeerUnreachable(NaiadError):
    """A process did not answer: not started yet, or killed and being restarted."""

    def __init__(self, label: str) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, f"{label} did not answer (it may be restarting)")
        self.label = label


class Peer:
    """Calls into one other process (a worker, or the model home: index -1); keeps idle
    connections for the next call.

    Calls block the calling thread: the event loop calls quick operations (statistics,
    shared-memory registrations) directly and runs long ones in a thread."""

    def __init__(self, index: int, path: str) -> None:
        self.index = index
        self.path = path
        self.label = "the model home" if index < 0 else f"worker {index}"
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()

    def call(self, operation: str, *arguments: Any, timeout_s: float | None = None) -> Any:
        """The operation's result; raises the worker's NaiadError, or PeerUnreachable (also
        when it did not answer within `timeout_s`)."""
        while True:
            sock, reused = self._connection()
            try:
                sock.settimeout(timeout_s)
                _send(sock, (operation, arguments))
                break
            except OSError:
                sock.close()
                if not reused:
                    raise PeerUnreachable(self.label) from None
                # A kept connection to a worker that has died since (and may have been
                # started again): the call never reached it; try a new connection. (Once
                # sent, a call is never sent again: it may have been applied.)
        try:
            ok, result = _receive(sock)
        except (OSError, EOFError):
            sock.close()
            raise PeerUnreachable(self.label) from None
        with self._lock:
            self._idle.append(sock)
        if not ok:
            code, message = result
            raise NaiadError(ErrorCode[code], message)
        return result

    def _connection(self) -> tuple[socket.socket, bool]:
        """A connection, and whether it was kept from an earlier call."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise PeerUnreachable(self.label) from None
        return sock, False

    def listening(self) -> bool:
        """Whether a worker listens on this peer's socket now."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(self.path)
            except OSError:
                return False
        return True

    def close(self) -> None:
        with self._lock:
            for sock in self._idle:
                sock.close()
            self._idle.clear()
