"""naiad's HTTP/1.1 server (`--http-server naiad`, the default): httptools parses requests
in an asyncio Protocol; requests its `DirectRoute` takes (naiad's `POST .../infer`) are
answered straight from the parsed request, and every other request goes to the ASGI app
through a small bridge.

Why our own: under uvicorn, the server layer (ASGI scope and message dicts, the per-request
cycle object, its flow-control and disconnect plumbing) cost more per small inference than
naiad's parsing, validation and scheduling together (docs/performance.md). Here an infer
request costs one task and one write, and a client that disconnects cancels its task
directly, so the scheduler drops the queued request (as Triton does).

HTTP/1.1 as clients use it: keep-alive (--http-keepalive-timeout, 75 s idle), pipelining
(answered in order), `Expect: 100-continue`, chunked request bodies (httptools decodes them),
HTTP/1.0, HEAD. No upgrades (WebSocket, h2c): those get 400. Bodies over
--http-max-input-size get 400 and the connection closes, without buffering the rest. A
request head not complete within --http-header-read-timeout gets 408 and the connection
closes.

Back-pressure: a connection stops reading while the answer written last has not left (the
transport's buffer is over its high-water mark), or while the requests parsed but not yet
answered exceed 16 or 1 MiB of bodies; what one connection holds is then one request being
read, those queued, and one answer. It reads again once they drain. (uvicorn stops reading
at the first pipelined request; Triton after a few MiB.)
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Protocol
from urllib.parse import unquote

import httptools
import orjson

from .balance import balanced
from .connections import close_lingering, stop_serving

__all__ = [
    "Http1Server",
    "Http1Connection",
    "Request",
    "DirectAnswer",
    "DirectRoute",
    "RequestRejected",
    "ASGIApp",
    "Scope",
    "ErrorApp",
]

log = logging.getLogger("naiad.http")

_REASONS = {
    200: b"OK",
    204: b"No Content",
    400: b"Bad Request",
    404: b"Not Found",
    405: b"Method Not Allowed",
    408: b"Request Timeout",
    413: b"Payload Too Large",
    422: b"Unprocessable Entity",
    429: b"Too Many Requests",
    500: b"Internal Server Error",
    501: b"Not Implemented",
    503: b"Service Unavailable",
}
# Pipelined requests waiting behind the one being answered, and their bodies' bytes, before
# reading pauses.
_MAX_PIPELINED = 16
# At shutdown, how long an idle keep-alive connection waits for a request its client may have
# on the way before it closes: closing under that request would lose it, unanswered.
_DRAIN_IDLE_S = 1.0
_MAX_PIPELINED_BYTES = 1 << 20
# The request line and headers together: more is refused, not buffered without bound.
MAX_HEAD_BYTES = 64 * 1024
# Bytes received while a request's head is incomplete: bounds what the parser buffers for one
# endless header (pipelined heads in the same packets count too, hence the margin).
_MAX_UNPARSED_HEAD = 16 * MAX_HEAD_BYTES


# ASGI's shapes (asgiref's spec), kept loose: the server hands dicts to any ASGI 3 app.
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# The ASGI app that answers an exception a handler raised (a JSON error body, say).
ErrorApp = Callable[[Exception, Scope], ASGIApp]
# A direct answer: (content, media type, extra headers).
DirectAnswer = tuple[bytes, str, dict[str, str]]


class RequestRejected(Exception):
    """Raised while a request is parsed: the connection answers 400 with this message (as
    JSON, `{"error": ...}`) and closes."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DirectRoute(Protocol):
    """Requests answered without ASGI: returns the answer's awaitable for a request it takes,
    None for one the ASGI app answers. What the awaitable raises goes to the `ErrorApp`."""

    def __call__(self, request: Request) -> Awaitable[DirectAnswer] | None: ...


def _head_too_large() -> RequestRejected:
    return RequestRejected(f"the request line and headers are larger than {MAX_HEAD_BYTES} bytes")


def _body_too_large(limit: int, size: int) -> str:
    return f"the request body is larger than the {limit} bytes allowed ({size} bytes or more)"


class _DateHeader:
    """`date: ...\\r\\n`, formatted once a second."""

    second: ClassVar[int] = -1
    value: ClassVar[bytes] = b""

    @classmethod
    def get(cls) -> bytes:
        now = int(time.time())
        if now != cls.second:
            cls.second = now
            cls.value = b"date: " + email.utils.formatdate(now, usegmt=True).encode() + b"\r\n"
        return cls.value


class Request:
    """A whole parsed request (header names in lowercase), as a `DirectRoute` reads it."""

    __slots__ = ("method", "url", "headers", "body", "keep_alive", "http_version")

    def __init__(
        self,
        method: bytes,
        url: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        keep_alive: bool,
        http_version: str,
    ) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.http_version = http_version


class Http1Connection(asyncio.Protocol):
    def __init__(self, server: Http1Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.closed = False
        # Kept: asking for the running loop costs a getpid() system call per request on
        # CPython 3.11 (it checks for a fork).
        self._loop = asyncio.get_event_loop()
        self.lost: asyncio.Future[None] = self._loop.create_future()
        self._draining = False  # shutting down: the next answer with nothing queued is the last
        self._queue: collections.deque[Request] = collections.deque()
        self._task: asyncio.Task[None] | None = None
        self._queued_bytes = 0
        self._reading = True
        self._writing = True  # False while the transport's write buffer is over its high-water mark
        # When the request head must be complete ("head") or the idle connection closes
        # ("idle"), in time.monotonic(); the server's sweep enforces it (no timer per request).
        self.deadline: float | None = None
        self._deadline_kind = ""
        self._in_head = False
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._size = 0
        self._in_body = False
        self._head_received = 0

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        self._set_deadline("head", self.server.header_timeout_s)  # for the first request's head

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        self.deadline = None
        if not self.lost.done():
            self.lost.set_result(None)
        self._queue.clear()
        self.parser = None  # type: ignore[assignment]  # it refers back to us: no cycle to collect
        if self._task is not None:
            self._task.cancel()  # the client left: drop its inference

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return  # refused: input is discarded until the connection closes (see _refuse)
        if not self._in_body:
            self._head_received += len(data)
            if self._head_received > _MAX_UNPARSED_HEAD:
                self._refuse(_head_too_large().message)
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse("protocol upgrades are not supported")
        except httptools.HttpParserError as exc:
            # httptools wraps what a callback raised (on_body: the body is over the limit).
            cause = exc.__context__
            self._refuse(cause.message if isinstance(cause, RequestRejected) else f"malformed HTTP request: {exc}")

    def pause_writing(self) -> None:
        # The client does not read its answers: read no more requests until it does.
        self._writing = False
        self._flow()

    def resume_writing(self) -> None:
        self._writing = True
        self._flow()
        if self._task is None and self._queue and not self.closed:
            self._next()

    # -- httptools callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = []
        self._body = []
        self._size = 0
        self._in_head = True
        if self.deadline is None or self._deadline_kind == "idle":
            self._set_deadline("head", self.server.header_timeout_s)

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))
        self._count_head(len(name) + len(value))

    def _count_head(self, size: int) -> None:
        self._size += size
        if self._size > MAX_HEAD_BYTES:
            raise _head_too_large()

    def on_headers_complete(self) -> None:
        self._size = 0  # from here it counts the body
        self._in_body = True
        self._in_head = False
        self._head_received = 0
        self.deadline = None
        for name, value in self._headers:
            if name == b"expect" and value.lower() == b"100-continue" and self.transport is not None:
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self.server.max_input_size:
            raise RequestRejected(self.server.body_limit_message(self._size))
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._in_body = False
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        parser = self.parser
        self._queue.append(
            Request(
                parser.get_method(),
                self._url,
                self._headers,
                body,
                parser.should_keep_alive(),
                parser.get_http_version(),
            )
        )
        self._queued_bytes += len(body)
        if self._task is None and self._writing:
            self._next()
        else:
            self._flow()

    # -- answering, one request at a time ----------------------------------------------------

    def _flow(self) -> None:
        """Read while answers leave and the queue of parsed requests is short; else pause."""
        if self.closed:
            return
        read = self._writing and len(self._queue) <= _MAX_PIPELINED and self._queued_bytes <= _MAX_PIPELINED_BYTES
        if read != self._reading:
            self._reading = read
            if read:
                self.transport.resume_reading()  # type: ignore[union-attr]
            else:
                self.transport.pause_reading()  # type: ignore[union-attr]

    def _next(self) -> None:
        request = self._queue.popleft()
        self._queued_bytes -= len(request.body)
        self._flow()
        self._task = self._loop.create_task(self._answer(request))
        self._task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[None]) -> None:
        self._task = None
        if self.closed:
            return
        if not task.cancelled() and task.exception() is not None:
            log.error("HTTP request failed", exc_info=task.exception())
            self.transport.close()  # type: ignore[union-attr]
            return
        if self._queue:
            if self._writing:
                self._next()  # else once the answer written last has left (resume_writing)
        elif not (self._in_head or self._in_body):
            self._set_deadline("idle", self.server.keep_alive_s)

    async def _answer(self, request: Request) -> None:
        direct = self.server.direct
        answer = direct(request) if direct is not None else None
        if answer is None:
            await self._asgi(request)
        else:
            await self._direct(request, answer)

    async def _direct(self, request: Request, answer: Awaitable[DirectAnswer]) -> None:
        try:
            content, media_type, extra = await answer
        except Exception as exc:  # noqa: BLE001 - answered like every other endpoint
            scope = self._scope(request)
            await self.server.error_app(exc, scope)(scope, _no_receive, self._sender(request))
            return
        head = [b"content-type: ", media_type.encode(), b"\r\ncontent-length: ", str(len(content)).encode(), b"\r\n"]
        for key, value in extra.items():
            head += [key.encode("latin-1"), b": ", value.encode("latin-1"), b"\r\n"]
        self._write(request, 200, b"".join(head), content)

    def _write(self, request: Request, status: int, headers: bytes, body: bytes) -> None:
        """One whole response; `headers` are complete `name: value\\r\\n` lines."""
        if self.closed:
            return
        self.transport.write(self._head(request, status, headers) + (b"" if request.method == b"HEAD" else body))  # type: ignore[union-attr]
        if not request.keep_alive:
            self.transport.close()  # type: ignore[union-attr]

    def _head(self, request: Request, status: int, headers: bytes) -> bytes:
        if self._draining and not self._queue:
            # The last answer before the connection closes for the shutdown: it says so, and
            # the client sends its next request elsewhere instead of losing it here.
            request.keep_alive = False
        connection = b""
        if not request.keep_alive:
            connection = b"connection: close\r\n"
        elif request.http_version == "1.0":
            connection = b"connection: keep-alive\r\n"
        return b"HTTP/1.1 %d %s\r\n%s%s%s\r\n" % (
            status,
            _REASONS.get(status, b""),
            _DateHeader.get(),
            connection,
            headers,
        )

    # -- everything else: the ASGI app -------------------------------------------------------

    def _scope(self, request: Request) -> dict[str, Any]:
        url = httptools.parse_url(request.url)
        raw_path = url.path or b"/"
        transport = self.transport
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version,
            "server": transport.get_extra_info("sockname") if transport else None,
            "client": transport.get_extra_info("peername") if transport else None,
            "scheme": "http",
            "method": request.method.decode("ascii"),
            "root_path": "",
            "path": unquote(raw_path.decode("latin-1")),
            "raw_path": raw_path,
            "query_string": url.query or b"",
            "headers": request.headers,
        }

    def _receiver(self, request: Request) -> Receive:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": request.body, "more_body": False}
            await self.lost
            return {"type": "http.disconnect"}

        return receive

    def _sender(self, request: Request) -> _AsgiResponse:
        return _AsgiResponse(self, request)

    async def _asgi(self, request: Request) -> None:
        scope = self._scope(request)
        send = self._sender(request)
        try:
            await self.server.app(scope, self._receiver(request), send)
        except Exception as exc:  # noqa: BLE001 - one failing request must not end the server
            if not send.head_written:
                await self.server.error_app(exc, scope)(scope, _no_receive, send)
                return
            log.error("HTTP handler failed after it started answering", exc_info=exc)
        if not send.done and not self.closed:
            # The app ended without finishing its answer: the connection cannot be reused.
            self.transport.close()  # type: ignore[union-attr]

    # -- connection lifetime -----------------------------------------------------------------

    def _refuse(self, message: str, status: int = 400) -> None:
        if self.closed or self.transport is None:
            return
        body = orjson.dumps({"error": message})
        self.transport.write(
            b"HTTP/1.1 %d %s\r\n%scontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, _REASONS[status], _DateHeader.get(), len(body), body)
        )
        self.closed = True  # input is discarded from now on
        close_lingering(self.transport)

    def _set_deadline(self, kind: str, delay: float) -> None:
        self._deadline_kind = kind
        self.deadline = time.monotonic() + delay

    def deadline_passed(self) -> None:
        """Called by the server's sweep once `deadline` is past."""
        self.deadline = None
        if self.closed or self.transport is None:
            return
        if self._deadline_kind == "idle":
            if self._task is None and not self._queue:
                self.transport.close()
        elif not self._reading:  # we stopped reading (back-pressure): not the client's delay
            self._set_deadline("head", self.server.header_timeout_s)
        elif self._in_head:
            self._refuse(f"the request head was not received within {self.server.header_timeout_s:g} s", 408)
        elif self._task is None and not self._queue:
            self.transport.close()  # connected, and sent nothing

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def shutdown(self) -> None:
        """Answer what the client asked, then close: the answer written when nothing else is
        queued says `Connection: close`, and the connection closes after it. An idle
        connection waits a moment for a request its client may have on the way (closing
        under it would lose it): it is answered the same way, else the connection closes."""
        self._draining = True
        if self._task is None and not self._queue:
            self._loop.call_later(_DRAIN_IDLE_S, self._close_if_idle)

    def _close_if_idle(self) -> None:
        if not self.closed and self._task is None and not self._queue and not (self._in_head or self._in_body):
            self.transport.close()  # type: ignore[union-attr]


class _AsgiResponse:
    """The ASGI `send` of one request: whole responses in one write, chunked ones when the
    app streams without a content-length."""

    __slots__ = ("connection", "request", "start", "head_written", "chunked", "done")

    def __init__(self, connection: Http1Connection, request: Request) -> None:
        self.connection = connection
        self.request = request
        self.start: dict[str, Any] | None = None
        self.head_written = False
        self.chunked = False
        self.done = False

    async def __call__(self, message: dict[str, Any]) -> None:
        connection = self.connection
        if connection.closed or self.done:
            return
        kind = message["type"]
        if kind == "http.response.start":
            self.start = message
            return
        if kind != "http.response.body":
            return
        request = self.request
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if not self.head_written:
            start = self.start or {"status": 500, "headers": []}
            lines = [b"%s: %s\r\n" % (bytes(k).lower(), bytes(v)) for k, v in start.get("headers", [])]
            has_length = any(line.startswith(b"content-length:") for line in lines)
            self.head_written = True
            if not more:
                self.done = True
                if not has_length:
                    lines.append(b"content-length: %d\r\n" % len(body))
                connection._write(request, start["status"], b"".join(lines), body)
                return
            if not has_length:
                self.chunked = True
                lines.append(b"transfer-encoding: chunked\r\n")
            connection.transport.write(connection._head(request, start["status"], b"".join(lines)))  # type: ignore[union-attr]
        transport = connection.transport
        assert transport is not None
        if request.method != b"HEAD" and body:
            transport.write(b"%x\r\n%s\r\n" % (len(body), body) if self.chunked else body)
        if not more:
            self.done = True
            if self.chunked and request.method != b"HEAD":
                transport.write(b"0\r\n\r\n")
            if not request.keep_alive:
                transport.close()


async def _no_receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


class Http1Server:
    """Serves `app` (and `direct`) on a listening socket. A body over `max_input_size` is
    refused with `body_limit_message(size)`."""

    def __init__(
        self,
        app: ASGIApp,
        max_input_size: int,
        keep_alive_s: float,
        header_timeout_s: float,
        *,
        error_app: ErrorApp,
        direct: DirectRoute | None = None,
        body_limit_message: Callable[[int], str] | None = None,
    ) -> None:
        self.app = app
        self.direct = direct
        self.error_app = error_app
        self.max_input_size = max_input_size
        self.body_limit_message = body_limit_message or (lambda size: _body_too_large(max_input_size, size))
        self.keep_alive_s = keep_alive_s
        self.header_timeout_s = header_timeout_s
        self.connections: set[Http1Connection] = set()
        self._listener: asyncio.AbstractServer | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        # Deadlines are checked this often: a quarter of the shorter timeout, at most a second.
        self._sweep_s = min(1.0, header_timeout_s / 4, keep_alive_s / 4)

    async def start(self, sock: Any) -> None:
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(
            balanced(b"h", lambda: Http1Connection(self)), sock=sock, backlog=2048
        )
        self._sweeper = loop.call_later(self._sweep_s, self._sweep)

    def _sweep(self) -> None:
        """One timer for every connection's deadline, instead of arming and cancelling one per
        request (a few microseconds each, on every request)."""
        now = time.monotonic()
        for connection in [c for c in self.connections if c.deadline is not None and c.deadline <= now]:
            connection.deadline_passed()
        self._sweeper = asyncio.get_event_loop().call_later(self._sweep_s, self._sweep)

    async def stop(self, grace_s: float) -> None:
        """Stop listening; requests being answered get `grace_s` to finish."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        await stop_serving(self._listener, self.connections, grace_s)
