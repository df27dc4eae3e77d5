"""A server side of HTTP/2 (RFC 9113) as a sans-IO state machine, made for gRPC: bytes in,
events and bytes out (`http2_protocol.py` feeds it from an asyncio transport).

Why our own: grpc.aio spent ~430 us of CPU per small ModelInfer in its core, its completion
queue poller thread and the wake-ups between them (docs/performance.md). Here a request is
parsed in the event loop's `data_received`, and a unary answer leaves in one `write`.

This module knows frames, streams, flow control, PING and GOAWAY; nothing of gRPC and no
I/O. `Http2State.receive(data)` yields events as it parses (a new request stream, a body's
data, a reset, the handshake done, a PING acknowledged), those of one frame before the next
frame is parsed: the caller handles each as it comes, so a handler's answer (or its
`StreamEvents`) is in place for the frames that follow. What the connection sends gathers in an outbox (`data_to_send`); outside
`receive` (a stream answered later, a timer), `on_output` says that bytes wait. What it does
not do: server push, and priorities (PRIORITY is parsed and ignored, as RFC 9113 allows).

What a peer may cost is bounded here (`Http2Limits`): open streams (MAX_CONCURRENT_STREAMS,
then REFUSED_STREAM), streams ended while their call runs (the "rapid reset" attack), pings
(gRPC's policy), what waits to be sent (reading pauses while the peer does not read), what
waits to be read (receive windows; a stream may reopen its window only as its reader takes
the data, `Stream.acknowledge`), header blocks, and time (preface and SETTINGS, idle
connections). Request headers are checked as RFC 9113 8.2/8.3 require
(request_headers.py) before a stream is handed on.
"""

from __future__ import annotations

import asyncio  # only for Stream.drained, the awaitable an asyncio application waits on
import collections
import logging
import os
import struct
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Final, Protocol

from .header_compression import TABLE_SIZE_ZERO, HeaderCompressionError, HeaderDecoder
from .request_headers import MalformedRequest, check_request, check_trailers

__all__ = [
    "Http2Limits",
    "Http2State",
    "Stream",
    "StreamEvents",
    "ErrorCode",
    "Event",
    "RequestReceived",
    "DataReceived",
    "StreamReset",
    "HandshakeDone",
    "PingAcknowledged",
    "PREFACE",
]

log = logging.getLogger("naiad.grpc")

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types and flags.
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20


class ErrorCode:
    NO_ERROR: Final = 0x0
    PROTOCOL_ERROR: Final = 0x1
    INTERNAL_ERROR: Final = 0x2
    FLOW_CONTROL_ERROR: Final = 0x3
    STREAM_CLOSED: Final = 0x5
    FRAME_SIZE_ERROR: Final = 0x6
    REFUSED_STREAM: Final = 0x7
    CANCEL: Final = 0x8
    COMPRESSION_ERROR: Final = 0x9
    ENHANCE_YOUR_CALM: Final = 0xB


_HEADER = struct.Struct(">BHBBL")  # length (24 bits as 8 + 16), type, flags, stream id
_SETTING = struct.Struct(">HL")
_U32 = struct.Struct(">L")
_MAX_WINDOW = 2**31 - 1
_DEFAULT_WINDOW = 65_535
_DEFAULT_FRAME = 16_384
# Not a wire flag: marks a HEADERS frame whose priority names its own stream (RFC 9113 5.3.1).
_SELF_DEPENDENT = 0x100


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    length = len(payload)
    return _HEADER.pack(length >> 16, length & 0xFFFF, kind, flags, stream_id) + payload


@dataclass
class Http2Limits:
    """What a connection advertises and enforces; the keepalive fields keep gRPC's meaning
    (`naiad serve --grpc-keepalive-*`), in seconds."""

    # Receive windows: large, so a client streams a big tensor without waiting on us for
    # WINDOW_UPDATEs; memory stays bounded by the message size limit per call.
    stream_window: int = 4 << 20
    connection_window: int = 16 << 20
    # The RFC's default, as gRPC servers keep it: larger frames measured no faster here
    # (tritonclient, 1-4 MiB tensors), and a HEADERS frame stays small.
    max_frame_size: int = _DEFAULT_FRAME
    max_header_list_size: int = 1 << 20
    keepalive_time_s: float | None = 7200.0
    keepalive_timeout_s: float = 20.0
    keepalive_permit_without_calls: bool = False
    max_pings_without_data: int = 2
    min_recv_ping_interval_without_data_s: float = 300.0
    max_ping_strikes: int = 2
    max_connection_age_s: float | None = None
    max_connection_age_grace_s: float | None = None
    # Streams open at once (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused (REFUSED_STREAM,
    # which a client may retry).
    max_concurrent_streams: int = 1000
    # Time for a new connection to send the preface and its SETTINGS; time a connection with
    # no open stream stays open (GOAWAY, then close). None: no limit.
    handshake_timeout_s: float | None = 10.0
    idle_timeout_s: float | None = None
    # Streams that end while their handler runs, by the peer's RST_STREAM or by a stream error
    # the peer provoked, at most this many per `reset_window_s` (0: no limit); one more gets
    # GOAWAY ENHANCE_YOUR_CALM "too_many_resets" and the connection closes. Opening a stream
    # and resetting it at once costs the peer two frames and the server a call's start, and
    # never counts against MAX_CONCURRENT_STREAMS: the "rapid reset" attack (CVE-2023-44487)
    # and its variant where the server is made to reset (CVE-2025-8671). Netty's defaults (200
    # in 30 s): a client cancelling its calls one by one at a human pace never meets them.
    max_resets: int = 200
    reset_window_s: float = 30.0


class StreamEvents(Protocol):
    def data_received(self, data: bytes, end_stream: bool) -> None: ...

    def stream_reset(self) -> None:
        """The peer reset the stream or the connection went away: nothing more can be sent."""


RequestHandler = Callable[["Stream", list[tuple[str, str]], bool], StreamEvents]


# -- events: what `Http2State.receive` yields --------------------------------------------


@dataclass(slots=True)
class RequestReceived:
    """A new request stream: its handler's `StreamEvents` go to `stream.events`."""

    stream: Stream
    headers: list[tuple[str, str]]
    end_stream: bool


@dataclass(slots=True)
class DataReceived:
    """Body data for the stream's handler, if it has one (b"" with end_stream when trailers
    end the body)."""

    stream: Stream
    data: bytes
    end_stream: bool


@dataclass(slots=True)
class StreamReset:
    """The peer reset the stream (or broke a rule on it): its handler stops."""

    events: StreamEvents


@dataclass(slots=True)
class HandshakeDone:
    """The peer's first SETTINGS arrived after its preface."""


@dataclass(slots=True)
class PingAcknowledged:
    """The peer answered our PING (a keepalive)."""


Event = RequestReceived | DataReceived | StreamReset | HandshakeDone | PingAcknowledged


class Stream:
    """One request stream. Sends respect the peer's flow-control windows: what does not fit
    waits in `pending` and leaves when the peer opens its window."""

    __slots__ = (
        "id",
        "connection",
        "events",
        "send_window",
        "recv_window",
        "recv_unacked",
        "remote_closed",
        "local_closed",
        "pending",
        "_drain",
        "content_length",
        "manual_acknowledgement",
    )

    def __init__(self, stream_id: int, connection: Http2State) -> None:
        self.id = stream_id
        self.connection = connection
        self.events: StreamEvents | None = None
        self.send_window = connection.peer_initial_window
        self.recv_window = connection.limits.stream_window
        self.recv_unacked = 0
        self.remote_closed = False
        self.local_closed = False
        self.pending: collections.deque[tuple[int, bytes | memoryview, bool]] = collections.deque()
        self._drain: asyncio.Future[None] | None = None
        # What the request's content-length says is still to come (None: it sent none).
        self.content_length: int | None = None
        # False: the receive window reopens as data arrives. True: as the application says it
        # has taken the data (`acknowledge`), so a reader slower than its peer bounds the bytes
        # waiting for it to the window.
        self.manual_acknowledgement = False

    def send_headers(self, block: bytes, end_stream: bool = False) -> None:
        if self.local_closed:
            return
        if self.pending:
            self.pending.append((HEADERS, block, end_stream))
            return
        self.connection._write_headers(self.id, block, end_stream)
        if end_stream:
            self._local_end()

    def send_data(self, data: bytes, end_stream: bool = False) -> None:
        if self.local_closed:
            return
        if self.pending:
            self.pending.append((DATA, memoryview(data), end_stream))
            return
        rest = self.connection._write_data(self, data, end_stream)
        if rest is not None:
            self.pending.append((DATA, rest, end_stream))
            self.connection._blocked[self.id] = self
        elif end_stream:
            self._local_end()

    def respond(self, headers: bytes, data: bytes, trailers: bytes) -> None:
        """Headers, one DATA frame and trailers in one write when they fit the windows (the
        usual case for a unary call); otherwise the same through the flow-controlled path."""
        connection = self.connection
        size = len(data)
        if (
            self.local_closed
            or self.pending
            or connection._table_size_update  # the general path prefixes the size update
            or size > connection.peer_max_frame
            or size > self.send_window
            or size > connection.send_window
            or len(headers) > connection.peer_max_frame
            or len(trailers) > connection.peer_max_frame
        ):
            self.send_headers(headers)
            self.send_data(data)
            self.send_headers(trailers, end_stream=True)
            return
        self.send_window -= size
        connection.send_window -= size
        sid = self.id
        connection._write(
            frame(HEADERS, END_HEADERS, sid, headers)
            + frame(DATA, 0, sid, data)
            + frame(HEADERS, END_HEADERS | END_STREAM, sid, trailers)
        )
        connection._sent_payload()
        self._local_end()

    def acknowledge(self, size: int) -> None:
        """The application has taken `size` bytes of the body: the peer may send as many more."""
        self.recv_unacked += size
        if self.recv_unacked >= self.connection.limits.stream_window // 2 and not self.remote_closed:
            self.connection._write(frame(WINDOW_UPDATE, 0, self.id, _U32.pack(self.recv_unacked)))
            self.recv_window += self.recv_unacked
            self.recv_unacked = 0

    def reset(self, code: int = ErrorCode.CANCEL) -> None:
        connection = self.connection
        if connection._streams.get(self.id) is self:
            connection._write(frame(RST_STREAM, 0, self.id, _U32.pack(code)))
        self.local_closed = self.remote_closed = True
        self.pending.clear()
        connection._forget(self)

    async def drained(self) -> None:
        """Wait until what was sent has left this process (or the stream closed)."""
        while (self.pending or self.connection.paused) and not self.local_closed:
            if self._drain is None or self._drain.done():
                self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    def _wake(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def _flush(self) -> None:
        connection = self.connection
        while self.pending:
            kind, item, end = self.pending[0]
            if kind == HEADERS:
                self.pending.popleft()
                connection._write_headers(self.id, item, end)  # type: ignore[arg-type]
            else:
                rest = connection._write_data(self, item, end)
                if rest is not None:
                    self.pending[0] = (DATA, rest, end)
                    return
                self.pending.popleft()
            if end:
                self._local_end()
                return
        connection._blocked.pop(self.id, None)
        self._wake()

    def _local_end(self) -> None:
        self.local_closed = True
        connection = self.connection
        if not self.remote_closed:
            # Answered before the client finished sending: tell it to stop (RFC 9113 8.1).
            connection._write(frame(RST_STREAM, 0, self.id, _U32.pack(ErrorCode.NO_ERROR)))
            self.remote_closed = True
        connection._forget(self)
        self._wake()


class _ConnectionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Http2State:
    """One client connection's HTTP/2 state. `on_output` is called when bytes wait in the
    outbox outside `receive`; `closed` turns true once the connection should close (after
    what waits to be sent has left)."""

    def __init__(self, limits: Http2Limits, on_output: Callable[[], None] = lambda: None) -> None:
        self.limits = limits
        self.on_output = on_output
        self.decoder = HeaderDecoder(max_header_list_size=limits.max_header_list_size)
        self.peer_initial_window = _DEFAULT_WINDOW
        self.peer_max_frame = _DEFAULT_FRAME
        self.send_window = _DEFAULT_WINDOW
        self._recv_window = _DEFAULT_WINDOW
        self._recv_unacked = 0
        self._streams: dict[int, Stream] = {}
        self._blocked: dict[int, Stream] = {}
        self._last_stream_id = 0
        self._buffer = bytearray()
        self._need = len(PREFACE)
        self._preface = True
        self._continuation: tuple[int, int, bytearray] | None = None
        # Frames waiting to be sent; a large DATA payload is a view of its message, not a copy.
        self._outbox: list[bytes | memoryview] = []
        self._events: list[Event] = []  # the events of the frame being parsed
        self._receiving = False
        # True while what was sent has not left (the transport's buffer is over its mark).
        self.paused = False
        self._idle_since = time.monotonic()  # when the last stream closed
        self._settings_received = False
        self._known_names: set[str] = set()  # header names found valid (request_headers.py)
        self._goaway_sent = False
        self.closed = False
        self._table_size_update = False
        self._pings_without_data = 0
        self._ping_strikes = 0
        self._next_ping_allowed = 0.0
        self._resets = 0  # streams reset while open since `_resets_since`
        self._resets_since = 0.0

    # -- the caller's side -------------------------------------------------------------------

    def initiate(self) -> None:
        """Our SETTINGS and the connection window's update: the first bytes to send."""
        limits = self.limits
        settings = b"".join(
            _SETTING.pack(key, value)
            for key, value in (
                (0x2, 0),  # ENABLE_PUSH
                (0x3, limits.max_concurrent_streams),  # MAX_CONCURRENT_STREAMS
                (0x4, limits.stream_window),  # INITIAL_WINDOW_SIZE
                (0x5, limits.max_frame_size),  # MAX_FRAME_SIZE
                (0x6, limits.max_header_list_size),  # MAX_HEADER_LIST_SIZE
            )
        )
        self._recv_window = limits.connection_window
        self._write(
            frame(SETTINGS, 0, 0, settings)
            + frame(WINDOW_UPDATE, 0, 0, _U32.pack(limits.connection_window - _DEFAULT_WINDOW))
        )

    def data_to_send(self) -> bytes:
        """What waits to be sent, taken out of the outbox."""
        outbox = self.take_output()
        if len(outbox) == 1 and type(outbox[0]) is bytes:
            return outbox[0]
        return b"".join(outbox)

    def take_output(self) -> list[bytes | memoryview]:
        """What waits to be sent, as the pieces it was written in (for a gathered write)."""
        outbox, self._outbox = self._outbox, []
        return outbox

    def lose(self) -> list[StreamEvents]:
        """The connection is gone: every stream ends; returns their handlers, to be reset."""
        self.closed = True
        self._outbox.clear()
        streams = list(self._streams.values())
        self._streams.clear()
        self._blocked.clear()
        handlers = []
        for stream in streams:
            stream.local_closed = stream.remote_closed = True
            stream._wake()
            if stream.events is not None:
                handlers.append(stream.events)
        return handlers

    def resume(self) -> None:
        """What was sent has left: streams waiting in `drained` go on."""
        self.paused = False
        for stream in list(self._streams.values()):
            stream._wake()

    def receive(self, data: bytes) -> Generator[Event, None, None]:
        """Parse `data`, yielding events as they happen; iterate to the end, then send
        `data_to_send()`. A connection error is answered (GOAWAY) and closes the connection."""
        if self.closed:
            return  # closing: input is discarded (see _close)
        buffer = self._buffer
        if buffer:
            buffer += data
            if len(buffer) < self._need:
                return  # a large frame still arriving: do not copy it again and again
            data = bytes(buffer)
            buffer.clear()
        self._receiving = True
        try:
            try:
                consumed = yield from self._frames(data)
            except _ConnectionError as exc:
                self._events.clear()
                self._fail(exc.code, str(exc))
                consumed = len(data)
        finally:
            self._receiving = False
        if consumed < len(data):
            buffer += memoryview(data)[consumed:]

    # -- receiving ---------------------------------------------------------------------------

    def _frames(self, data: bytes) -> Generator[Event, None, int]:
        """Parse the frames in `data`, yielding each frame's events before the next frame is
        parsed; returns how much of `data` was used (the rest is an incomplete frame)."""
        position = 0
        end = len(data)
        if self._preface:
            if end < len(PREFACE):
                self._need = len(PREFACE)
                return 0
            if data[: len(PREFACE)] != PREFACE:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "expected the HTTP/2 connection preface")
            self._preface = False
            position = len(PREFACE)
        max_frame = self.limits.max_frame_size
        unpack = _HEADER.unpack_from
        while end - position >= 9:
            high, low, kind, flags, stream_id = unpack(data, position)
            length = high << 16 | low
            if length > max_frame:
                raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, f"frame of {length} bytes exceeds {max_frame}")
            if end - position - 9 < length:
                self._need = 9 + length
                return position
            start = position + 9
            position = start + length
            self._frame(kind, flags, stream_id & 0x7FFFFFFF, data[start:position])
            if self._events:
                events, self._events = self._events, []
                for event in events:
                    yield event
                    if type(event) is RequestReceived or type(event) is DataReceived:
                        # Answered and ended by its handler: the stream is done.
                        stream = event.stream
                        if stream.local_closed and stream.remote_closed:
                            self._forget(stream)
            if self.closed:
                return end
        self._need = 9
        return position

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if not self._settings_received and kind != SETTINGS:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "the preface must be followed by SETTINGS")
        if self._continuation is not None and kind != CONTINUATION:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "expected a CONTINUATION frame")
        if kind == DATA:
            self._data(flags, stream_id, payload)
        elif kind == HEADERS:
            self._headers(flags, stream_id, payload)
        elif kind == WINDOW_UPDATE:
            self._window_update(stream_id, payload)
        elif kind == SETTINGS:
            self._settings(flags, stream_id, payload)
        elif kind == PING:
            self._ping(flags, stream_id, payload)
        elif kind == RST_STREAM:
            self._rst_stream(stream_id, payload)
        elif kind == CONTINUATION:
            self._continuation_frame(flags, stream_id, payload)
        elif kind == GOAWAY:
            if stream_id:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream")
        elif kind == PRIORITY:
            if stream_id == 0:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0")
            if len(payload) != 5:
                self._stream_error(stream_id, ErrorCode.FRAME_SIZE_ERROR)
            elif _U32.unpack_from(payload)[0] & 0x7FFFFFFF == stream_id:
                self._stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)  # depends on itself
        elif kind == PUSH_PROMISE:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "a client cannot push")
        # Unknown frame types are ignored (RFC 9113 4.1).

    @staticmethod
    def _unpad(flags: int, payload: bytes) -> bytes:
        if not flags & PADDED:
            return payload
        if not payload or payload[0] >= len(payload):
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "padding longer than the frame")
        return payload[1 : len(payload) - payload[0]]

    def _data(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0")
        length = len(payload)
        self._recv_window -= length
        if self._recv_window < 0:
            raise _ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "the peer overran the connection window")
        self._recv_unacked += length
        if self._recv_unacked >= self.limits.connection_window // 2:
            self._write(frame(WINDOW_UPDATE, 0, 0, _U32.pack(self._recv_unacked)))
            self._recv_window += self._recv_unacked
            self._recv_unacked = 0
        data = self._unpad(flags, payload)
        stream = self._streams.get(stream_id)
        if stream is None or stream.remote_closed:
            if stream_id > self._last_stream_id:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, f"DATA on idle stream {stream_id}")
            self._stream_error(stream_id, ErrorCode.STREAM_CLOSED)
            return
        stream.recv_window -= length
        if stream.recv_window < 0:
            self._stream_error(stream_id, ErrorCode.FLOW_CONTROL_ERROR)
            return
        end = bool(flags & END_STREAM)
        if stream.content_length is not None:
            # RFC 9113 8.1.1: a body that differs from its content-length is malformed.
            stream.content_length -= len(data)
            if stream.content_length < 0 or (end and stream.content_length):
                self._stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)
                return
        if end:
            stream.remote_closed = True
        elif stream.manual_acknowledgement:
            stream.acknowledge(length - len(data))  # the padding is nobody's to take
        else:
            stream.acknowledge(length)
        self._events.append(DataReceived(stream, data, end))

    def _headers(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id == 0 or stream_id % 2 == 0:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, f"HEADERS on stream {stream_id}")
        block = self._unpad(flags, payload)
        if flags & PRIORITY_FLAG:
            if len(block) < 5:
                raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "HEADERS too short for its priority")
            if _U32.unpack_from(block)[0] & 0x7FFFFFFF == stream_id:
                flags |= _SELF_DEPENDENT  # a stream error, once the block has been decoded
            block = block[5:]
        if flags & END_HEADERS:
            self._header_block(flags, stream_id, block)
        else:
            self._continuation = (stream_id, flags, bytearray(block))

    def _continuation_frame(self, flags: int, stream_id: int, payload: bytes) -> None:
        pending = self._continuation
        if pending is None or pending[0] != stream_id:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "unexpected CONTINUATION frame")
        pending[2].extend(payload)
        if len(pending[2]) > self.limits.max_header_list_size * 2:
            raise _ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "header block too large")
        if flags & END_HEADERS:
            self._continuation = None
            self._header_block(pending[1], stream_id, bytes(pending[2]))

    def _header_block(self, flags: int, stream_id: int, block: bytes) -> None:
        try:
            headers = self.decoder.decode(block)
        except HeaderCompressionError as exc:
            raise _ConnectionError(ErrorCode.COMPRESSION_ERROR, str(exc)) from None
        end = bool(flags & END_STREAM)
        stream = self._streams.get(stream_id)
        if stream is not None:  # trailers: gRPC clients send none, but they end the body
            if stream.remote_closed:  # half-closed (remote): RFC 9113 5.1
                self._stream_error(stream_id, ErrorCode.STREAM_CLOSED)
                return
            if not end:  # trailers end the stream, or the request is malformed (RFC 9113 8.1)
                self._stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)
                return
            try:
                check_trailers(headers)
            except MalformedRequest as malformed:  # not `exc` again: mypyc types a name once per function
                self._malformed(stream_id, malformed)
                return
            if stream.content_length:
                self._stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)
                return
            stream.remote_closed = True
            self._events.append(DataReceived(stream, b"", True))
            return
        if stream_id <= self._last_stream_id:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, f"stream {stream_id} was already used")
        self._last_stream_id = stream_id
        if flags & _SELF_DEPENDENT:
            self._stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)
            return
        try:
            content_length = check_request(headers, self._known_names)
        except MalformedRequest as malformed:
            self._malformed(stream_id, malformed)
            return
        if self._goaway_sent or len(self._streams) >= self.limits.max_concurrent_streams:
            self._stream_error(stream_id, ErrorCode.REFUSED_STREAM)
            return
        if end and content_length:
            self._stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)
            return
        stream = Stream(stream_id, self)
        stream.remote_closed = end
        stream.content_length = content_length
        self._streams[stream_id] = stream
        self._events.append(RequestReceived(stream, headers, end))  # its handler sets stream.events

    def _malformed(self, stream_id: int, exc: MalformedRequest) -> None:
        log.debug("HTTP/2 stream %d: malformed request: %s", stream_id, exc)
        self._stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)

    def _window_update(self, stream_id: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE of the wrong size")
        increment = _U32.unpack(payload)[0] & 0x7FFFFFFF
        if stream_id > self._last_stream_id:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {stream_id}")
        if stream_id == 0:
            if increment == 0:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0")
            self.send_window += increment
            if self.send_window > _MAX_WINDOW:
                raise _ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "connection window above 2^31-1")
            self._flush_blocked()
            return
        if increment == 0:
            self._stream_error(stream_id, ErrorCode.PROTOCOL_ERROR)
            return
        stream = self._streams.get(stream_id)
        if stream is None:
            return  # a stream that just closed
        stream.send_window += increment
        if stream.send_window > _MAX_WINDOW:
            self._stream_error(stream_id, ErrorCode.FLOW_CONTROL_ERROR)
            return
        if stream.pending:
            stream._flush()

    def _settings(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            return
        if len(payload) % 6:
            raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS of the wrong size")
        for offset in range(0, len(payload), 6):
            key, value = _SETTING.unpack_from(payload, offset)
            if key == 0x1:  # HEADER_TABLE_SIZE: our encoder keeps none; say so once it shrinks
                self._table_size_update = value < 4096
            elif key == 0x2:
                if value > 1:
                    raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, f"ENABLE_PUSH {value} is neither 0 nor 1")
            elif key == 0x4:
                if value > _MAX_WINDOW:
                    raise _ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE above 2^31-1")
                delta = value - self.peer_initial_window
                self.peer_initial_window = value
                for stream in self._streams.values():
                    stream.send_window += delta
            elif key == 0x5:
                if not _DEFAULT_FRAME <= value <= 0xFFFFFF:
                    raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, f"MAX_FRAME_SIZE {value} out of range")
                self.peer_max_frame = value
        self._write(frame(SETTINGS, ACK, 0))
        self._flush_blocked()
        if not self._settings_received:
            self._settings_received = True
            self._events.append(HandshakeDone())

    def _ping(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PING of the wrong size")
        if flags & ACK:
            self._events.append(PingAcknowledged())
            return
        # gRPC's ping abuse policy: pings closer together than the configured interval (two
        # hours while there are no calls, unless permitted without calls) are strikes, unless
        # headers or data were sent in between; too many end the connection with
        # ENHANCE_YOUR_CALM "too_many_pings".
        now = time.monotonic()
        limits = self.limits
        if limits.max_ping_strikes and now < self._next_ping_allowed:
            self._ping_strikes += 1
            if self._ping_strikes > limits.max_ping_strikes:
                self._goaway(ErrorCode.ENHANCE_YOUR_CALM, b"too_many_pings")
                self._close()
                return
        idle_interval = limits.min_recv_ping_interval_without_data_s
        if not self._streams and not limits.keepalive_permit_without_calls:
            idle_interval = max(idle_interval, 7200.0)
        self._next_ping_allowed = now + idle_interval
        self._write(frame(PING, ACK, 0, payload))

    def _rst_stream(self, stream_id: int, payload: bytes) -> None:
        if stream_id == 0:
            raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise _ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM of the wrong size")
        stream = self._streams.get(stream_id)
        if stream is None:
            if stream_id > self._last_stream_id:
                raise _ConnectionError(ErrorCode.PROTOCOL_ERROR, f"RST_STREAM on idle stream {stream_id}")
            return
        stream.local_closed = stream.remote_closed = True
        stream.pending.clear()
        events = stream.events
        self._forget(stream)
        stream._wake()
        if events is not None:
            self._events.append(StreamReset(events))
            self._count_reset()

    # -- sending -----------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if not self.closed:
            self._outbox.append(data)
            if not self._receiving:
                self.on_output()

    def _write_pieces(self, pieces: list[bytes | memoryview]) -> None:
        if not self.closed:
            self._outbox += pieces
            if not self._receiving:
                self.on_output()

    def _sent_payload(self) -> None:
        # Sending headers or data resets gRPC's ping accounting.
        self._pings_without_data = 0
        self._ping_strikes = 0

    def _write_headers(self, stream_id: int, block: bytes, end_stream: bool) -> None:
        if self._table_size_update:
            block = TABLE_SIZE_ZERO + block
            self._table_size_update = False
        flags = END_STREAM if end_stream else 0
        limit = self.peer_max_frame
        if len(block) <= limit:
            self._write(frame(HEADERS, flags | END_HEADERS, stream_id, block))
        else:
            parts = [block[i : i + limit] for i in range(0, len(block), limit)]
            frames = [frame(HEADERS, flags, stream_id, parts[0])]
            frames += [frame(CONTINUATION, 0, stream_id, part) for part in parts[1:-1]]
            frames.append(frame(CONTINUATION, END_HEADERS, stream_id, parts[-1]))
            self._write(b"".join(frames))
        self._sent_payload()

    def _write_data(self, stream: Stream, data: bytes | memoryview, end_stream: bool) -> memoryview | None:
        """Send what the windows allow; returns what is left (None when all was sent)."""
        view = memoryview(data)
        total = len(view)
        if total == 0:
            self._write(frame(DATA, END_STREAM if end_stream else 0, stream.id))
            return None
        allowed = min(total, self.send_window, stream.send_window)
        if allowed <= 0:
            return view
        limit = self.peer_max_frame
        frames: list[bytes | memoryview] = []
        for offset in range(0, allowed, limit):
            chunk = view[offset : min(offset + limit, allowed)]
            last = offset + len(chunk) == total
            length = len(chunk)
            frames.append(
                _HEADER.pack(length >> 16, length & 0xFFFF, DATA, END_STREAM if end_stream and last else 0, stream.id)
            )
            frames.append(chunk)  # a view: a large payload leaves in a gathered write, not copied
        self._write_pieces(frames)
        self.send_window -= allowed
        stream.send_window -= allowed
        self._sent_payload()
        return None if allowed == total else view[allowed:]

    def _flush_blocked(self) -> None:
        for stream in list(self._blocked.values()):
            if self.send_window <= 0:
                return
            stream._flush()

    def _forget(self, stream: Stream) -> None:
        # The stream and its events (a gRPC call) refer to each other: cutting the link lets
        # reference counting free both, instead of the cyclic collector.
        stream.events = None
        if self._streams.get(stream.id) is stream:
            del self._streams[stream.id]
        self._blocked.pop(stream.id, None)
        if not self._streams:
            if self._goaway_sent:
                self._close()
            self._idle_since = time.monotonic()  # the idle timer, already running, reads it

    def _stream_error(self, stream_id: int, code: int) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            events = stream.events
            stream.reset(code)
            if events is not None:
                self._events.append(StreamReset(events))
                self._count_reset()
        else:
            self._write(frame(RST_STREAM, 0, stream_id, _U32.pack(code)))

    def _count_reset(self) -> None:
        """A stream ended while its handler ran: past `max_resets` in the window, GOAWAY."""
        limits = self.limits
        if not limits.max_resets:
            return
        now = time.monotonic()
        if now - self._resets_since > limits.reset_window_s:
            self._resets_since = now
            self._resets = 0
        self._resets += 1
        if self._resets > limits.max_resets:
            log.warning(
                "closing an HTTP/2 connection that reset more than %d streams within %g s",
                limits.max_resets,
                limits.reset_window_s,
            )
            self._goaway(ErrorCode.ENHANCE_YOUR_CALM, b"too_many_resets")
            self._close()

    # -- connection lifetime -----------------------------------------------------------------

    def _goaway(self, code: int, debug: bytes = b"") -> None:
        if not self._goaway_sent:
            self._goaway_sent = True
            self._write(frame(GOAWAY, 0, 0, _U32.pack(self._last_stream_id) + _U32.pack(code) + debug))

    def _fail(self, code: int, message: str) -> None:
        log.debug("HTTP/2 connection error %d: %s", code, message)
        self._goaway(code, message.encode()[:256])
        self._close()

    def _close(self) -> None:
        """Close once what was written (GOAWAY last) has left; input is discarded meanwhile."""
        if self.closed:
            return
        self.closed = True
        if not self._receiving:
            self.on_output()

    def shutdown(self) -> None:
        """Refuse new streams; close once the open ones finish."""
        self._goaway(ErrorCode.NO_ERROR)
        if not self._streams:
            self._close()

    def idle_for(self) -> float:
        """Seconds the connection has had no open stream (0 while it has one)."""
        return 0.0 if self._streams else time.monotonic() - self._idle_since

    def handshake_timed_out(self) -> None:
        log.debug("closing an HTTP/2 connection that did not send its preface and SETTINGS in time")
        self._goaway(ErrorCode.PROTOCOL_ERROR, b"no preface and SETTINGS in time")
        self._close()

    def keepalive_ping(self) -> bool:
        """Send a keepalive PING if gRPC's policy allows one now; True when one was sent (its
        answer is then due within keepalive_timeout_s)."""
        limits = self.limits
        with_calls = bool(self._streams) or limits.keepalive_permit_without_calls
        room = not limits.max_pings_without_data or self._pings_without_data < limits.max_pings_without_data
        if with_calls and room:
            self._pings_without_data += 1
            self._write(frame(PING, 0, 0, os.urandom(8)))
            return True
        return False
