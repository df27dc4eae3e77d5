"""A TCP proxy on 127.0.0.1 in front of an object-store emulator, for the remote repository
tests: it counts the requests the server sends (by method and path), and it can take the
store away (connections refused) or stall it (connections accepted, never answered)."""

from __future__ import annotations

import re
import socket
import threading
import time
from urllib.parse import unquote

__all__ = ["ObjectStoreProxy"]

_REQUEST_LINE = re.compile(rb"(GET|HEAD|PUT|POST|DELETE|PATCH) (\S+) HTTP/1\.[01]\r\n")


class ObjectStoreProxy:
    """`port` forwards to `upstream_port` while `mode` is "up"; "down" closes the listening
    socket and every connection; "stalled" accepts connections and holds them unanswered.
    `stall_paths` stalls only the connections that ask for a path holding that text."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._lock = threading.Lock()
        self._requests: list[tuple[str, str]] = []
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.mode = "down"
        self.stall_paths = ""
        self.bytes_per_second = 0  # 0: answers pass at full speed
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.up()

    def requests(self, method: str, path_fragment: str) -> int:
        """How many requests of `method` whose unquoted path holds `path_fragment` came in."""
        with self._lock:
            return sum(1 for m, path in self._requests if m == method and path_fragment in path)

    def up(self) -> None:
        with self._lock:
            self.mode = "up"
            self.stall_paths = ""
            if self._listener is None:
                listener = socket.socket()
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(("127.0.0.1", self.port))
                listener.listen(64)
                self._listener = listener
                threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stall(self, path_fragment: str = "") -> None:
        """From now on nothing is answered (or only what does not ask for a path holding
        `path_fragment`), on new connections and on those already open."""
        with self._lock:
            if path_fragment:
                self.stall_paths = path_fragment
            else:
                self.mode = "stalled"

    def throttle(self, bytes_per_second: int) -> None:
        """Answers trickle at this rate, in pieces every tenth of a second: a slow link."""
        self.bytes_per_second = bytes_per_second

    def down(self) -> None:
        with self._lock:
            self.mode = "down"
            listener, self._listener = self._listener, None
            open_sockets, self._sockets = self._sockets, set()
        for sock in [listener, *open_sockets]:
            if sock is not None:
                _close(sock)

    def close(self) -> None:
        self.down()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets |= {client, upstream}
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        seen = b""
        stalled = False
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                _close(source)
                _close(target)
                return
            if self.mode == "stalled" or stalled:
                continue  # swallowed: the peer waits for an answer that never comes
            if from_client:
                # Request lines may straddle two reads; keep the unfinished tail.
                seen += data
                with self._lock:
                    for match in _REQUEST_LINE.finditer(seen):
                        path = unquote(match.group(2).decode())
                        self._requests.append((match.group(1).decode(), path))
                        stalled = stalled or bool(self.stall_paths and self.stall_paths in path)
                if stalled:
                    continue
                cut = seen.rfind(b"\r\n")
                seen = seen[cut + 2 :] if cut >= 0 else seen[-8192:]
            try:
                self._send(target, data, from_client)
            except OSError:
                _close(source)
                return

    def _send(self, target: socket.socket, data: bytes, from_client: bool) -> None:
        rate = self.bytes_per_second
        if from_client or not rate:
            target.sendall(data)
            return
        piece = max(1, rate // 10)
        for start in range(0, len(data), piece):
            target.sendall(data[start : start + piece])
            time.sleep(0.1)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
