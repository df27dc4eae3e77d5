"""The asyncio side of naiad's HTTP/2 server: a Protocol that feeds a connection's bytes to
its `Http2State`, hands the events to the application, writes what the state has to send,
and keeps the connection's timers (handshake, idle, keepalive, age)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import cast

from .connections import close_lingering
from .gathered_write import write_pieces
from .http2 import (
    DataReceived,
    HandshakeDone,
    Http2Limits,
    Http2State,
    PingAcknowledged,
    RequestHandler,
    RequestReceived,
    StreamReset,
)

__all__ = ["Http2Connection"]

log = logging.getLogger("naiad.grpc")


class Http2Connection(asyncio.Protocol):
    """One client connection. `connections` (the server's set) holds it while it is open;
    `on_request(stream, headers, end_stream)` returns the `StreamEvents` of a new stream."""

    def __init__(self, on_request: RequestHandler, limits: Http2Limits, connections: set[Http2Connection]) -> None:
        self.on_request = on_request
        self.limits = limits
        self.connections = connections
        self.state = Http2State(limits, self._flush)
        self.transport: asyncio.Transport | None = None
        self._closing = False
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.lost: asyncio.Future[None] = asyncio.get_event_loop().create_future()

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not a check: uvloop's transports do not subclass asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)
        self.connections.add(self)
        limits = self.limits
        self.state.initiate()  # its bytes leave through _flush, the state's on_output
        if limits.handshake_timeout_s:
            self._later("handshake", limits.handshake_timeout_s, self._handshake_timed_out)
        if limits.idle_timeout_s:
            self._later("idle", limits.idle_timeout_s, self._idle_check)
        if limits.keepalive_time_s:
            self._later("keepalive", limits.keepalive_time_s, self._keepalive)
        if limits.max_connection_age_s:
            self._later("age", limits.max_connection_age_s, self._age_reached)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.connections.discard(self)
        for timer in self._timers.values():
            timer.cancel()
        for events in self.state.lose():
            events.stream_reset()
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        # The peer does not read what we send (answers, PING and SETTINGS acknowledgements):
        # read no more from it until it does, so what waits to be sent stays bounded.
        self.state.paused = True
        if not self.state.closed:
            self._transport().pause_reading()

    def resume_writing(self) -> None:
        if not self.state.closed:
            self._transport().resume_reading()
        self.state.resume()

    def data_received(self, data: bytes) -> None:
        for event in self.state.receive(data):
            if type(event) is DataReceived:
                events = event.stream.events
                if events is not None:
                    events.data_received(event.data, event.end_stream)
            elif type(event) is RequestReceived:
                stream = event.stream
                stream.events = self.on_request(stream, event.headers, event.end_stream)
            elif type(event) is StreamReset:
                event.events.stream_reset()
            elif type(event) is HandshakeDone:
                self._cancel("handshake")
            elif type(event) is PingAcknowledged:
                self._cancel("keepalive-timeout")
        self._flush()

    # -- output ------------------------------------------------------------------------------

    def _transport(self) -> asyncio.Transport:
        assert self.transport is not None
        return self.transport

    def _flush(self) -> None:
        """Write what the state has to send; close once it asks to, after those bytes."""
        if self._closing:
            return
        pieces = self.state.take_output()  # frame headers, and views of large payloads
        if pieces:
            write_pieces(self._transport(), pieces)
        if self.state.closed:
            self._closing = True
            close_lingering(self._transport())

    # -- connection lifetime -----------------------------------------------------------------

    def shutdown(self) -> None:
        """Refuse new streams; close once the open ones finish."""
        self.state.shutdown()
        self._flush()

    def move_on(self) -> None:
        """Ask the client to connect again (to be balanced anew): GOAWAY, which tells it which
        streams were taken, so it retries any other on a new connection."""
        self.shutdown()

    def abort(self) -> None:
        if self.transport is not None:
            self.state.closed = self._closing = True
            self.transport.abort()

    def _later(self, name: str, delay: float, callback: Callable[[], None]) -> None:
        self._cancel(name)
        self._timers[name] = asyncio.get_event_loop().call_later(delay, callback)

    def _cancel(self, name: str) -> None:
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    def _idle_check(self) -> None:
        # One timer for the connection's life rather than one per call: when it fires, it
        # looks at how long the connection has had no stream, and waits the rest.
        limit = self.limits.idle_timeout_s or 0.0
        idle_for = self.state.idle_for()
        if idle_for < limit:
            self._later("idle", limit - idle_for, self._idle_check)
        elif not self.state.closed:
            log.debug("closing an idle HTTP/2 connection")
            self.shutdown()

    def _handshake_timed_out(self) -> None:
        self.state.handshake_timed_out()
        self._flush()

    def _keepalive(self) -> None:
        limits = self.limits
        if self.state.closed:
            return
        if "keepalive-timeout" not in self._timers and self.state.keepalive_ping():
            self._later("keepalive-timeout", limits.keepalive_timeout_s, self._keepalive_timed_out)
        self._later("keepalive", limits.keepalive_time_s or 0, self._keepalive)

    def _keepalive_timed_out(self) -> None:
        log.info("closing a gRPC connection: no answer to a keepalive ping")
        self.abort()

    def _age_reached(self) -> None:
        self.shutdown()
        grace = self.limits.max_connection_age_grace_s
        if grace is not None and not self.state.closed:
            self._later("age-grace", grace, self.abort)
