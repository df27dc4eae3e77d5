"""`HttpConnection`: one keep-alive HTTP/1.1 connection that sends pre-encoded requests one
at a time and reads each answer with httptools.

The load generator must not be what limits a measurement: a request is bytes encoded once
before the step starts, written with one `transport.write`, and its answer is parsed by
httptools' C parser straight from `data_received`, with no stream objects in between.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import cast

import httptools

from .load_error import ServerUnreachable
from .target import Target

__all__ = ["HttpAnswer", "HttpConnection"]


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    status: int
    body: bytes
    # perf_counter_ns when the answer's first bytes arrived.
    first_byte_ns: int


class HttpConnection(asyncio.Protocol):
    def __init__(self, keep_body: bool) -> None:
        # The load path drops answer bodies (it needs only the status); error bodies are kept.
        self._keep_body = keep_body
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[HttpAnswer] | None = None
        self._body: list[bytes] = []
        self._first_byte_ns = 0
        self._lost: Exception | None = None

    @classmethod
    async def open(cls, target: Target, keep_body: bool = False) -> HttpConnection:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.create_connection(lambda: cls(keep_body), target.host, target.port)
        except OSError as exc:
            raise ServerUnreachable(f"cannot reach the server at {target}: {exc.strerror or exc}") from None
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionResetError("the server closed the connection")
        self._transport = None
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(self._lost)

    def data_received(self, data: bytes) -> None:
        if not self._first_byte_ns:
            self._first_byte_ns = time.perf_counter_ns()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self._waiter is not None and not self._waiter.done():
                self._waiter.set_exception(ConnectionError(f"the server's answer is not HTTP/1.1: {exc}"))
            self.close()

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        if self._keep_body or self._parser.get_status_code() >= 400:
            self._body.append(body)

    def on_message_complete(self) -> None:
        answer = HttpAnswer(self._parser.get_status_code(), b"".join(self._body), self._first_byte_ns)
        self._body.clear()
        self._first_byte_ns = 0
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(answer)

    def send(self, request: bytes) -> asyncio.Future[HttpAnswer]:
        """Write one whole request; the future is its answer (ConnectionError when the
        connection goes)."""
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        if self._transport is None:
            waiter.set_exception(self._lost or ConnectionResetError("the connection is closed"))
        else:
            self._transport.write(request)
        return waiter

    @property
    def is_open(self) -> bool:
        return self._transport is not None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
