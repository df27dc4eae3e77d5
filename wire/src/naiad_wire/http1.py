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
HTTP/1.0, HEAD. No upgrades (WebSocket, h2c): those get 400.

What a client can make the server hold is bounded in size and in time (docs/http.md):
- A body over --http-max-input-size gets 413 and the connection closes without reading the
  rest: at the head when its Content-Length says so, else (chunked) once it passes the limit.
- A request head not complete within --http-header-read-timeout gets 408 and the connection
  closes. A body gets 408 when none of it arrives for --http-body-read-timeout, or when,
  after that long, it arrives slower on average than --http-body-min-rate.
- An answer the client does not take (the transport's buffer stays over its high-water mark
  for --http-write-timeout) is dropped with the connection.
- Request bytes held by every connection of the server together (bodies being read, queued
  or being answered) are bounded by --http-max-buffered-bytes: past it, connections reading
  a body stop reading until memory frees, except one, so that the server always progresses.
Deadlines are checked by one sweep a second at most, never by a timer per request.

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
from .connections import close_lingering, reset, stop_serving
from .gathered_write import write_pieces
from .heap_return import HeapReturn

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
# Defaults of the limits that naiad's HttpOptions sets from its flags (docs/http.md says why).
BODY_TIMEOUT_S = 60.0
BODY_MIN_RATE = 64 * 1024
WRITE_TIMEOUT_S = 60.0
MAX_BUFFERED = 1 << 30
# The most one read from a socket brings (the size of the server's receive buffer): a
# connection let read again under the budget may add this much before it is checked.
_READ_SIZE = 256 * 1024


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
    """Raised while a request is parsed: the connection answers `status` (400 unless told)
    with this message (as JSON, `{"error": ...}`) and closes."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


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


class Http1Connection(asyncio.BufferedProtocol):
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
        self._moving_on = False  # the next answer with nothing queued is the last (move_on)
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
        # Body bytes this connection counts in the server's `buffered` (bodies being read,
        # queued, and the one being answered, whose size is `_answering`).
        self._held = 0
        self._answering = 0
        self._budget_wait = False  # stopped reading until the server's buffer budget frees
        # Reading a body past the budget, by the server's one right to (`Http1Server.holder`);
        # then how many answers until that request's is done and the right goes back.
        self._overdraft = False
        self._overdraft_left = 0
        # The body's clock, kept by the sweep: 0.0 until it first sees the body (or after the
        # server itself stopped reading); then when it started, the body's size then, and the
        # size and time it last saw the body grow.
        self._body_since = 0.0
        self._body_base = 0
        self._body_seen = 0
        self._body_seen_at = 0.0
        # While the transport's buffer is over its high-water mark: since when the client has
        # taken none of it (0.0: it is not over), and its size then.
        self.write_stuck_since = 0.0
        self._write_seen = 0

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        self._set_deadline("head", self.server.header_timeout_s)  # for the first request's head

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        server = self.server
        server.connections.discard(self)
        self.deadline = None
        self.write_stuck_since = 0.0
        if not self.lost.done():
            self.lost.set_result(None)
        server.forget(self)
        self._drop_requests()
        self._answering = 0
        self._release(self._held)  # the body being answered too: its task is cancelled below
        self.parser = None  # type: ignore[assignment]  # it refers back to us: no cycle to collect
        if self._task is not None:
            self._task.cancel()  # the client left: drop its inference

    # Reads land in the server's one receive buffer, not in a bytes object the transport makes
    # for each read: that object was one copy more of every body (a 110 KB image: 5% of the
    # event loop's time at 64 connections). Sharing it is safe because the parser keeps nothing
    # of a read but copies of its own (httptools hands each piece of a body over as bytes)
    # before the next read, of any connection, can start.
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.server.receive_buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.server.receive_buffer[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
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
            return
        except httptools.HttpParserError as exc:
            # httptools wraps what a callback raised (the body is over the limit).
            cause = exc.__context__
            if isinstance(cause, RequestRejected):
                self._refuse(cause.message, cause.status)
            else:
                self._refuse(f"malformed HTTP request: {exc}")
            return
        server = self.server
        if self._in_body and server.buffered > server.max_buffered:
            server.wait_for_budget(self)

    def pause_writing(self) -> None:
        # The client does not read its answers: read no more requests until it does, and
        # drop the connection if it does not within the write timeout (the sweep checks).
        self._writing = False
        self.write_stuck_since = time.monotonic()
        self._write_seen = self.transport.get_write_buffer_size()  # type: ignore[union-attr]
        self._flow()

    def resume_writing(self) -> None:
        self._writing = True
        self.write_stuck_since = 0.0
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
        self._body_since = 0.0
        self.deadline = None
        expect = False
        for name, value in self._headers:
            if name == b"content-length":
                # Refused before a byte of the body is read (httptools has checked the value).
                declared = int(value)
                if declared > self.server.max_input_size:
                    raise RequestRejected(self.server.body_limit_message(declared), 413)
            elif name == b"expect" and value.lower() == b"100-continue":
                expect = True
        if expect and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        size = len(body)
        self._size += size
        if self._size > self.server.max_input_size:
            raise RequestRejected(self.server.body_limit_message(self._size), 413)
        self._body.append(body)
        self._held += size
        self.server.buffered += size

    def on_message_complete(self) -> None:
        self._in_body = False
        if self._overdraft:
            self._overdraft = False
            self._overdraft_left = len(self._queue) + (1 if self._task is not None else 0) + 1
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        if len(self._body) > 1:
            self.server.heap.released(len(body))
        self._body.clear()  # the pieces are not kept until the next request
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
        read = (
            self._writing
            and not self._budget_wait
            and len(self._queue) <= _MAX_PIPELINED
            and self._queued_bytes <= _MAX_PIPELINED_BYTES
        )
        if read != self._reading:
            self._reading = read
            if read:
                self.transport.resume_reading()  # type: ignore[union-attr]
            else:
                self.transport.pause_reading()  # type: ignore[union-attr]

    def _next(self) -> None:
        request = self._queue.popleft()
        size = len(request.body)
        self._queued_bytes -= size
        self._answering = size
        self._flow()
        self._task = self._loop.create_task(self._answer(request))
        self._task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[None]) -> None:
        self._task = None
        self._release(self._answering)
        self._answering = 0
        if self._overdraft_left:
            self._overdraft_left -= 1
            if not self._overdraft_left:
                self.server.free_holder(self)
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
        transport = self.transport
        assert transport is not None
        head = self._head(request, status, headers)
        if request.method == b"HEAD":
            transport.write(head)
        else:
            write_pieces(transport, (head, body))  # a large body is not copied behind its head
        if not request.keep_alive:
            transport.close()

    def _head(self, request: Request, status: int, headers: bytes) -> bytes:
        if (self._draining or self._moving_on) and not self._queue:
            # The last answer before the connection closes (for the shutdown, or to move on):
            # it says so, and the client sends its next request on a new connection instead
            # of losing it here.
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
            # Shielded: an app cancels this wait once its answer is sent (Starlette's
            # StreamingResponse does), and a cancelled wait would cancel the connection's
            # one `lost` future, so the next request's wait would end at once, "disconnected".
            await asyncio.shield(self.lost)
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
        self.server.forget(self)
        self._drop_requests()
        close_lingering(self.transport)

    def _drop_requests(self) -> None:
        """Let go of the body being read and of the requests queued: no request of this
        connection will be answered but the one being answered now."""
        self.server.heap.released(sum(map(len, self._body)))
        self._body = []
        self._headers = []
        self._queue.clear()
        self._queued_bytes = 0
        self._release(self._held - self._answering)

    def _release(self, size: int) -> None:
        if size > 0:
            self._held -= size
            self.server.release(size)

    def wait_for_budget(self, wait: bool) -> None:
        """Stop reading until the server's buffer budget frees (True), or read again."""
        self._budget_wait = wait
        self._flow()

    def _set_deadline(self, kind: str, delay: float) -> None:
        self._deadline_kind = kind
        self.deadline = time.monotonic() + delay

    def tick(self, now: float) -> None:
        """The server's sweep, for a connection with a deadline, a body being read, or an
        answer stuck in its buffer."""
        transport = self.transport
        if transport is None:
            return
        stuck = self.write_stuck_since
        if stuck > 0.0:
            size, seen = transport.get_write_buffer_size(), self._write_seen
            self._write_seen = size
            if size < seen:  # the client took some of it since the last look: the clock starts again
                self.write_stuck_since = now
            elif now - stuck >= self.server.write_timeout_s:
                # The client took none of its answer (or, closing, of its refusal): drop it
                # with what the transport and the kernel still buffer.
                log.debug("dropping an HTTP connection whose client read nothing for %.0f s", now - stuck)
                self.write_stuck_since = 0.0
                reset(transport)
                return
        if self.closed:
            return
        if self._in_body:
            self._watch_body(now)
        elif self.deadline is not None and self.deadline <= now:
            self.deadline_passed()

    def _watch_body(self, now: float) -> None:
        """408 for a body none of which arrived for the body timeout, or that, once the body
        timeout has passed, arrived slower on average than the minimum rate. While the server
        itself does not read (back-pressure), the client is not late: the clock starts again
        once it reads."""
        if not self._reading:
            self._body_since = 0.0
            return
        size = self._size
        if self._body_since == 0.0:
            self._body_since = self._body_seen_at = now
            self._body_base = self._body_seen = size
            return
        server = self.server
        timeout = server.body_timeout_s
        if size != self._body_seen:
            self._body_seen = size
            self._body_seen_at = now
        elif now - self._body_seen_at >= timeout:
            self._refuse(f"no part of the request body arrived for {timeout:g} s", 408)
            return
        rate = server.body_min_rate
        if rate > 0 and size - self._body_base < rate * (now - self._body_since - timeout):
            self._refuse(
                f"the request body arrived slower than the {rate} bytes/s allowed after {timeout:g} s",
                408,
            )

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

    def move_on(self) -> None:
        """Ask the client to connect again (to be balanced anew): the next answer with nothing
        queued says `Connection: close`, and the connection closes after it. An idle
        connection is never closed for this: a request may be on its way."""
        self._moving_on = True

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
    refused with `body_limit_message(size)`; the other limits are the module's docstring's.

    `buffered` is the request bytes every connection holds together (bodies being read,
    queued, being answered); past `max_buffered`, connections reading a body wait for it to
    fall, in `_waiting`, but the `holder`, which reads on so that the server always
    progresses."""

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
        body_timeout_s: float = BODY_TIMEOUT_S,
        body_min_rate: int = BODY_MIN_RATE,
        write_timeout_s: float = WRITE_TIMEOUT_S,
        max_buffered: int = MAX_BUFFERED,
        balance: bool = True,
    ) -> None:
        self.app = app
        # Whether connections may move to another process serving the port (balance.py): not
        # for a port only this process serves (the metrics port), whose connections another
        # process would answer with its own app.
        self.balance = balance
        self.direct = direct
        self.error_app = error_app
        self.max_input_size = max_input_size
        self.body_limit_message = body_limit_message or (lambda size: _body_too_large(max_input_size, size))
        self.keep_alive_s = keep_alive_s
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.body_min_rate = body_min_rate
        self.write_timeout_s = write_timeout_s
        self.max_buffered = max_buffered
        self.buffered = 0
        self.heap = HeapReturn()
        # What every connection reads into (Http1Connection.get_buffer says why).
        self.receive_buffer = memoryview(bytearray(_READ_SIZE))
        self.holder: Http1Connection | None = None
        self._waiting: collections.deque[Http1Connection] = collections.deque()
        self.connections: set[Http1Connection] = set()
        self._listener: asyncio.AbstractServer | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        # Deadlines are checked this often: a quarter of the shortest timeout, at most a second.
        self._sweep_s = min(1.0, header_timeout_s / 4, keep_alive_s / 4, body_timeout_s / 4, write_timeout_s / 4)

    # -- the buffer budget -------------------------------------------------------------------

    def wait_for_budget(self, connection: Http1Connection) -> None:
        """`connection`, reading a body, finds the budget spent: it stops reading, unless no
        connection holds the right to read on, in which case it takes it for this body."""
        if connection._overdraft:
            return
        if self.holder is None:
            self.holder = connection
            connection._overdraft = True
        elif not connection._budget_wait:
            connection.wait_for_budget(True)
            self._waiting.append(connection)

    def release(self, size: int) -> None:
        """`size` bytes of requests are let go: connections waiting may read again."""
        self.buffered -= size
        if self._waiting:
            self._wake()

    def _wake(self) -> None:
        # In the order they stopped: so many as may each add one read and stay within the
        # budget, and else one, given the right to read on while no connection holds it, so
        # that a budget full of bodies not yet whole cannot stall the server.
        room = self.max_buffered - self.buffered
        waiting = self._waiting
        while waiting:
            if room >= _READ_SIZE:
                room -= _READ_SIZE
                connection = waiting.popleft()
            elif self.holder is None:
                connection = waiting.popleft()
                self.holder = connection
                connection._overdraft = True
            else:
                break
            connection.wait_for_budget(False)

    def free_holder(self, connection: Http1Connection) -> None:
        """The request `connection` read over the budget is answered, or the connection is
        done: another may have the right to read on."""
        if self.holder is connection:
            self.holder = None
            if self._waiting:
                self._wake()

    def forget(self, connection: Http1Connection) -> None:
        """`connection` reads no more (closed or refused)."""
        if connection._budget_wait:
            connection._budget_wait = False
            self._waiting.remove(connection)
        connection._overdraft = False
        connection._overdraft_left = 0
        self.free_holder(connection)

    async def start(self, sock: Any) -> None:
        loop = asyncio.get_running_loop()

        def connection() -> asyncio.BaseProtocol:
            return Http1Connection(self)

        factory = balanced(b"h", connection) if self.balance else connection
        self._listener = await loop.create_server(factory, sock=sock, backlog=2048)
        self._sweeper = loop.call_later(self._sweep_s, self._sweep)

    def _sweep(self) -> None:
        """One timer for every connection's deadline, instead of arming and cancelling one per
        request (a few microseconds each, on every request)."""
        now = time.monotonic()
        due = [
            c
            for c in self.connections
            if (c.deadline is not None and c.deadline <= now) or c._in_body or c.write_stuck_since > 0.0
        ]
        for connection in due:
            connection.tick(now)
        self._sweeper = asyncio.get_event_loop().call_later(self._sweep_s, self._sweep)

    async def stop(self, grace_s: float) -> None:
        """Stop listening; requests being answered get `grace_s` to finish."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        await stop_serving(self._listener, self.connections, grace_s)
