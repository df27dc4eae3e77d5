"""naiad_wire.http1 with an ASGI app of the test's own and a direct route, over raw sockets:
pipelining in order, HTTP/1.0, 100-continue, chunked bodies, HEAD, refusals, errors."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Awaitable, Iterator
from typing import Any

import pytest

from naiad_wire.http1 import DirectAnswer, Http1Server, Request, RequestRejected, Scope
from naiad_wire.listen import listen

LIMIT = 1000


async def echo_app(scope: Scope, receive: Any, send: Any) -> None:
    """Answers with the method, path and body it received (HEAD: no body)."""
    body = (await receive())["body"]
    if scope["path"] == "/fail":
        raise ValueError("the app failed")
    content = json.dumps({"method": scope["method"], "path": scope["path"], "body": body.decode()}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": content})


# `/hold` answers once a `/release` request has been read: meanwhile its body lies in the server.
_released: asyncio.Event | None = None


def direct(request: Request) -> Awaitable[DirectAnswer] | None:
    if request.url == b"/hold":

        async def held() -> DirectAnswer:
            global _released
            _released = asyncio.Event()
            await _released.wait()
            return bytes(request.body)[::-1], "text/plain", {}

        return held()
    if request.url == b"/release":
        assert _released is not None
        _released.set()
        return None  # answered by the ASGI app
    if request.url == b"/large":

        async def large() -> DirectAnswer:
            return request.body * 50_000, "application/octet-stream", {}

        return large()
    if request.url != b"/direct":
        return None

    async def answer() -> DirectAnswer:
        if request.body == b"bad":
            raise RequestRejected("a bad body")
        return request.body[::-1], "text/plain", {"x-direct": "yes"}

    return answer()


def error_app(exc: Exception, scope: Scope) -> Any:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        body = json.dumps({"error": str(exc)}).encode()
        await send(
            {"type": "http.response.start", "status": 400, "headers": [(b"content-length", str(len(body)).encode())]}
        )
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    loop = asyncio.new_event_loop()
    sock = listen("127.0.0.1", 0)
    server = Http1Server(echo_app, LIMIT, 30.0, 2.0, error_app=error_app, direct=direct)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start(sock))
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    yield sock.getsockname()[1]
    asyncio.run_coroutine_threadsafe(server.stop(1.0), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


class Reader:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buffer = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def response(self, head_only: bool = False) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            assert self._fill(), "connection closed before a response"
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        status = int(lines[0].split()[1])
        length = 0 if head_only or status == 100 else int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            assert self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        self.sock.settimeout(5)
        try:
            return not self._fill()
        except ConnectionResetError:
            return True


def post(path: bytes, body: bytes, extra: bytes = b"", version: bytes = b"HTTP/1.1") -> bytes:
    return b"POST %s %s\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s" % (path, version, extra, len(body), body)


def test_pipelined_requests_are_answered_in_order(port):
    reader = Reader(port)
    reader.sock.sendall(post(b"/direct", b"abc") + post(b"/asgi", b"one") + post(b"/direct", b"xyz"))
    status, headers, body = reader.response()
    assert (status, body, headers["x-direct"], headers["content-type"]) == (200, b"cba", "yes", "text/plain")
    assert "date" in headers
    assert json.loads(reader.response()[2]) == {"method": "POST", "path": "/asgi", "body": "one"}
    assert reader.response()[2] == b"zyx"


def test_a_body_stays_the_requests_own_while_other_connections_are_read(port):
    """Every connection reads into one buffer of the server's: a body waiting to be answered
    must not be a view of it, or the next read would write over it."""
    holding, releasing = Reader(port), Reader(port)
    held = bytes(range(97, 123)) * 30
    holding.sock.sendall(post(b"/hold", held))
    deadline = time.monotonic() + 10
    while _released is None:  # the held request has been read and waits
        assert time.monotonic() < deadline
        time.sleep(0.01)
    releasing.sock.sendall(post(b"/release", b"z" * len(held)))
    assert json.loads(releasing.response()[2])["body"] == "z" * len(held)
    assert holding.response()[2] == held[::-1]


def test_a_large_answer_leaves_whole_beside_its_head(port):
    # An answer of 64 KiB or more is written beside its head, not copied behind it.
    reader = Reader(port)
    reader.sock.sendall(
        post(b"/large", b"ab") + post(b"/large", b"cd") + post(b"/large", b"ef", b"Connection: close\r\n")
    )
    for pair in (b"ab", b"cd", b"ef"):
        status, headers, body = reader.response()
        assert (status, int(headers["content-length"]), body) == (200, 100_000, pair * 50_000)
    assert headers["connection"] == "close" and reader.closed()


def test_http10_and_connection_close_end_the_connection(port):
    reader = Reader(port)
    reader.sock.sendall(post(b"/direct", b"ab", version=b"HTTP/1.0"))
    status, headers, body = reader.response()
    assert (status, body, headers.get("connection")) == (200, b"ba", "close") and reader.closed()
    reader = Reader(port)
    reader.sock.sendall(post(b"/asgi", b"", extra=b"Connection: close\r\n"))
    assert reader.response()[0] == 200 and reader.closed()


def test_expect_100_continue_and_a_chunked_body(port):
    reader = Reader(port)
    reader.sock.sendall(
        b"POST /direct HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    assert reader.response()[0] == 100
    reader.sock.sendall(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    assert reader.response()[2] == b"edcba"


def test_head_has_headers_but_no_body(port):
    reader = Reader(port)
    reader.sock.sendall(b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /g HTTP/1.1\r\nHost: x\r\n\r\n")
    status, headers, _ = reader.response(head_only=True)
    assert status == 200 and int(headers["content-length"]) > 0
    assert json.loads(reader.response()[2])["path"] == "/g"  # right after the head: no body sent


@pytest.mark.parametrize(
    "garbage",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost x\r\n\r\n",
        b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    ],
)
def test_malformed_requests_get_400_and_close(port, garbage):
    reader = Reader(port)
    reader.sock.sendall(garbage)
    status, _, body = reader.response()
    assert status == 400 and json.loads(body)["error"] and reader.closed()
    reader = Reader(port)
    reader.sock.sendall(post(b"/direct", b"ok"))
    assert reader.response()[2] == b"ko"  # serving on


def test_limits_refuse_bodies_and_heads_without_reading_them(port):
    reader = Reader(port)
    reader.sock.sendall(post(b"/asgi", b"x" * (LIMIT + 1)))
    status, _, body = reader.response()
    assert status == 413 and json.loads(body)["error"] == (
        f"the request body is larger than the {LIMIT} bytes allowed ({LIMIT + 1} bytes or more)"
    )
    assert reader.closed()
    reader = Reader(port)
    reader.sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (65 * 1024) + b"\r\n\r\n")
    status, _, body = reader.response()
    assert status == 400 and "larger than 65536 bytes" in json.loads(body)["error"] and reader.closed()


def test_what_a_handler_raises_goes_to_the_error_app(port):
    reader = Reader(port)
    reader.sock.sendall(post(b"/direct", b"bad") + post(b"/fail", b""))
    assert reader.response()[:3:2] == (400, b'{"error": "a bad body"}')
    assert reader.response()[:3:2] == (400, b'{"error": "the app failed"}')


def test_a_head_not_sent_in_time_gets_408(port):
    reader = Reader(port)
    reader.sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never finished; the server allows 2 s
    status, _, body = reader.response()
    assert status == 408 and "within 2 s" in json.loads(body)["error"] and reader.closed()
