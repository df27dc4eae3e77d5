"""What naiad_wire.http1 holds against clients that send or read too little, over real sockets
to a real asyncio server on 127.0.0.1 (one per test, with small limits): a body that stalls or
trickles gets 408, a declared body over the limit gets 413 before a byte of it is read, the
request bytes every connection holds stay within the server's budget (connections wait, they
do not fail) and go back to zero when the connections close, and an answer the client does
not read is dropped with its connection after the write timeout."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import socket
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from naiad_wire.http1 import DirectAnswer, Http1Server, Request, Scope
from naiad_wire.listen import listen

MiB = 1 << 20
T = TypeVar("T")


async def app(scope: Scope, receive: Any, send: Any) -> None:
    """GET /big?N answers N MiB; anything else answers its body's size."""
    body = (await receive())["body"]
    if scope["path"] == "/big":
        content = b"b" * (int(scope["query_string"]) * MiB)
    else:
        content = json.dumps({"size": len(body)}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": content})


def direct(request: Request) -> Awaitable[DirectAnswer] | None:
    """POST /slow?S answers after S seconds (its body stays held meanwhile)."""
    if not request.url.startswith(b"/slow"):
        return None

    async def answer() -> DirectAnswer:
        await asyncio.sleep(float(request.url.split(b"?")[1]))
        return b"%d" % len(request.body), "text/plain", {}

    return answer()


def error_app(exc: Exception, scope: Scope) -> Any:
    async def answer(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": repr(exc).encode()})

    return answer


@dataclass
class Running:
    server: Http1Server
    port: int
    loop: asyncio.AbstractEventLoop

    def call(self, function: Callable[[], T]) -> T:
        """`function()` on the server's loop: its state is read where it changes."""

        async def run() -> T:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def buffered(self) -> int:
        return self.call(lambda: self.server.buffered)

    def connections(self) -> int:
        return self.call(lambda: len(self.server.connections))

    def wait_for(self, condition: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.call(condition):
                return True
            time.sleep(0.05)
        return False


@contextlib.contextmanager
def serving(**limits: Any) -> Iterator[Running]:
    """An Http1Server on its own loop and thread; `limits` are its keyword arguments."""
    max_input_size = limits.pop("max_input_size", MiB)
    loop = asyncio.new_event_loop()
    sock = listen("127.0.0.1", 0)
    server = Http1Server(app, max_input_size, 30.0, 30.0, error_app=error_app, direct=direct, **limits)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start(sock))
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield Running(server, sock.getsockname()[1], loop)
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(0.5), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def connect(port: int, timeout: float = 10) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(path: bytes, length: int, extra: bytes = b"") -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" % (path, extra, length)


def response(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of one answer; the connection's end after it is read too."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "connection closed before a response"
        data += chunk
    head_bytes, body = data.split(b"\r\n\r\n", 1)
    lines = head_bytes.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(lines[0].split()[1]), body


def closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


# -- request bodies: a deadline, a minimum rate ----------------------------------------------


def test_a_body_that_stops_arriving_gets_408_and_the_connection_closes():
    """Headers, a few bytes of the body, then nothing: the audit's stalled upload."""
    with serving(body_timeout_s=1.0) as running, connect(running.port) as sock:
        start = time.monotonic()
        sock.sendall(head(b"/echo", 1000) + b"x" * 10)
        status, body = response(sock)
        waited = time.monotonic() - start
        assert status == 408 and json.loads(body) == {"error": "no part of the request body arrived for 1 s"}
        assert 1.0 <= waited < 3.0 and closed(sock)
        assert running.wait_for(lambda: running.server.buffered == 0, 3)


def test_a_body_trickling_slower_than_the_minimum_rate_gets_408():
    """A byte every 0.2 s never pauses as long as the timeout, but is far below the rate."""
    with serving(body_timeout_s=1.0, body_min_rate=1024) as running, connect(running.port) as sock:
        sock.sendall(head(b"/echo", 1000))
        start = time.monotonic()
        sock.settimeout(0.2)
        data = b""
        while time.monotonic() - start < 6:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(b"x")
            try:
                data += sock.recv(65536)
            except TimeoutError:
                continue
            if b"\r\n\r\n" in data:
                break
        assert data.startswith(b"HTTP/1.1 408 ")
        assert b"arrived slower than the 1024 bytes/s allowed after 1 s" in data
        assert 1.0 <= time.monotonic() - start < 3.5


def test_a_slow_but_steady_body_is_answered():
    """8 KiB every 0.1 s (80 KiB/s) for 2.5 s: over the minimum rate, past the timeout."""
    with serving(body_timeout_s=1.0, body_min_rate=32 * 1024) as running, connect(running.port) as sock:
        pieces = 25
        sock.sendall(head(b"/echo", pieces * 8192))
        for _ in range(pieces):
            sock.sendall(b"s" * 8192)
            time.sleep(0.1)
        assert response(sock) == (200, b'{"size": %d}' % (pieces * 8192))


# -- a declared body over the limit ---------------------------------------------------------------


@pytest.mark.parametrize("expect", [b"", b"Expect: 100-continue\r\n"])
def test_a_content_length_over_the_limit_gets_413_before_the_body_is_sent(expect):
    with serving() as running, connect(running.port, timeout=5) as sock:
        sock.sendall(head(b"/echo", 1_000_000_000, expect))  # and not a byte of the body
        status, body = response(sock)  # no 100 Continue first
        assert status == 413
        assert json.loads(body) == {
            "error": f"the request body is larger than the {MiB} bytes allowed (1000000000 bytes or more)"
        }
        assert closed(sock)


def test_a_chunked_body_over_the_limit_gets_413():
    with serving() as running, connect(running.port) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"c" * 65536
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(20):  # 1.25 MiB offered
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        assert response(sock)[0] == 413
        assert running.wait_for(lambda: running.server.buffered == 0, 3)


# -- the budget on request bytes of every connection ----------------------------------------------


def test_stalled_uploads_hold_no_more_than_the_budget_and_let_it_all_go_when_they_close():
    """12 uploads of 8 MiB stop at 7 MiB: 84 MiB offered, the server holds about its
    16 MiB budget (plus one body, plus a read per connection); when they close, its count is
    0 again and the memory Python allocated for them is returned."""
    budget, size, sent, count = 16 * MiB, 8 * MiB, 7 * MiB, 12
    with serving(max_input_size=size, max_buffered=budget) as running:
        payload = memoryview(b"u" * sent)
        tracemalloc.start()
        try:
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            socks = [connect(running.port) for _ in range(count)]
            for sock in socks:
                sock.setblocking(False)
                sock.send(head(b"/echo", size))

            def offer() -> int:
                """Send what each socket takes now; the bytes still to send."""
                left = 0
                for index, sock in enumerate(socks):
                    with contextlib.suppress(BlockingIOError):
                        done[index] += sock.send(payload[done[index] :])
                    left += sent - done[index]
                return left

            done = [0] * count
            peak, last_change, last_left = 0, time.monotonic(), -1
            while time.monotonic() - last_change < 1.0:  # until nothing moves for a second
                left = offer()
                if left != last_left:
                    last_left, last_change = left, time.monotonic()
                peak = max(peak, running.buffered())
                time.sleep(0.01)
            held = running.buffered()
            print(f"sent {sum(done) / MiB:.0f} MiB, the server holds {held / MiB:.1f} MiB, peak {peak / MiB:.1f} MiB")
            assert peak <= budget + size + count * 256 * 1024
            for sock in socks:
                sock.close()
            assert running.wait_for(lambda: running.server.buffered == 0 and not running.server.connections, 5)
            assert running.call(lambda: (running.server.holder, len(running.server._waiting))) == (None, 0)
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
            assert after - before < 4 * MiB, f"{(after - before) / MiB:.1f} MiB still allocated"
        finally:
            tracemalloc.stop()


def test_a_kept_alive_connection_holds_nothing_of_a_request_once_it_is_answered():
    """The pieces an 8 MiB body arrived in are let go when the body is whole, not kept by the
    connection until its next request (up to the keep-alive timeout)."""
    size = 8 * MiB
    with serving(max_input_size=size) as running, connect(running.port) as sock:
        request = head(b"/echo", size) + b"k" * size
        tracemalloc.start()
        try:
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            sock.sendall(request)
            assert response(sock) == (200, b'{"size": %d}' % size)
            assert running.wait_for(lambda: running.server.buffered == 0, 3)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
            assert held < 2 * MiB, f"{held / MiB:.1f} MiB still allocated while the connection idles"
        finally:
            tracemalloc.stop()
        assert running.connections() == 1  # still open, kept alive


def test_uploads_over_the_budget_wait_their_turn_and_are_all_answered():
    """8 clients send 3 MiB each at once to a server whose budget is 4 MiB: they stop and go
    as memory frees (one always reads on), none fails, and the budget holds meanwhile."""
    size, count, budget = 3 * MiB, 8, 4 * MiB
    with serving(max_input_size=4 * MiB, max_buffered=budget) as running:
        peak = [0]
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], running.buffered())
                time.sleep(0.005)

        def upload(index: int) -> tuple[int, bytes]:
            with connect(running.port, timeout=30) as sock:
                sock.sendall(head(b"/slow?0.05", size) + b"%d" % index * (size // len(b"%d" % index)))
                return response(sock)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(count) as pool:
                answers = list(pool.map(upload, range(count)))
        finally:
            stop.set()
            watcher.join()
        assert answers == [(200, b"%d" % size)] * count
        assert peak[0] <= budget + 4 * MiB + count * 256 * 1024
        assert running.wait_for(lambda: running.server.buffered == 0, 3)


def test_waiting_for_the_budget_is_not_the_clients_delay():
    """A 1 MiB body being answered for 3 s fills the 1 MiB budget, and a second one, answered
    as long, has the one right to read past it: a third client's body waits for the first
    answer, longer than the 1 s body timeout, and is then read and answered, not refused."""
    with serving(max_buffered=MiB, body_timeout_s=1.0) as running:
        with connect(running.port) as first, connect(running.port) as second, connect(running.port) as third:
            first.sendall(head(b"/slow?3", MiB) + b"1" * MiB)
            assert running.wait_for(lambda: running.server.buffered >= MiB, 5)
            second.sendall(head(b"/slow?3", MiB) + b"2" * MiB)
            assert running.wait_for(lambda: running.server.buffered >= 2 * MiB, 5)
            start = time.monotonic()
            third.sendall(head(b"/slow?0", 512 * 1024) + b"3" * (512 * 1024))
            assert running.wait_for(lambda: len(running.server._waiting) == 1, 5)
            assert response(third) == (200, b"524288")
            assert time.monotonic() - start > 1.5  # it waited for the first answer
            assert response(first) == (200, b"1048576") and response(second) == (200, b"1048576")
        assert running.wait_for(lambda: running.server.buffered == 0, 3)


# -- answers the client does not read -------------------------------------------------------------


def small_receive_buffer(port: int) -> socket.socket:
    """A client socket whose kernel buffer takes little, so the server's fills soon."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


def test_an_answer_the_client_does_not_read_is_dropped_after_the_write_timeout():
    with serving(write_timeout_s=1.0) as running, small_receive_buffer(running.port) as sock:
        assert running.wait_for(lambda: len(running.server.connections) == 1, 5)
        start = time.monotonic()
        sock.sendall(b"GET /big?32 HTTP/1.1\r\nHost: x\r\n\r\n")  # 32 MiB, never read
        assert running.wait_for(lambda: not running.server.connections, 6), "the connection is still open"
        assert 0.9 < time.monotonic() - start < 4
        received = 0
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        assert received < 32 * MiB


def test_a_client_that_reads_its_answer_with_pauses_gets_all_of_it():
    """Four pauses of 0.6 s, each shorter than the 1.5 s write timeout, 2.4 s in all; the
    client takes 2 MiB after each (the kernel wakes the server's writes only once a good part
    of its socket buffer is free)."""
    size = 16 * MiB
    with serving(write_timeout_s=1.5) as running, small_receive_buffer(running.port) as sock:
        sock.sendall(b"GET /big?16 HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        for _ in range(4):
            time.sleep(0.6)
            target = len(received) + 2 * MiB
            while len(received) < target:
                chunk = sock.recv(1 << 20)
                assert chunk, "the answer was cut"
                received += chunk
        while b"\r\n\r\n" not in received or len(received.split(b"\r\n\r\n", 1)[1]) < size:
            chunk = sock.recv(1 << 20)
            assert chunk, "the answer was cut"
            received += chunk
        assert received.startswith(b"HTTP/1.1 200 ")
