"""`GrpcH2Connection`: one HTTP/2 connection that carries unary gRPC calls one at a time,
on raw asyncio with naiad_wire's HPACK.

Why not grpc.aio for the load itself: a grpc.aio call costs the client ~150 us of CPU here,
enough to make the client, not the server, the limit on a 2-core machine (perf_analyzer's
C++ client costs a fraction of that). Here a call is one HEADERS frame whose header block
is encoded once, and the message's DATA frames; only the stream id changes. The answer's
frames are read straight from `data_received`; every header block is decoded (HPACK's
table must follow the server's) but only `:status`, `grpc-status` and `grpc-message` are
read. Flow control is kept both ways: the server's windows bound what is sent, and ours
are opened wide and topped up.
"""

from __future__ import annotations

import asyncio
import struct
import time
import urllib.parse
from typing import cast

from naiad_wire.grpc_status import StatusCode
from naiad_wire.header_compression import HeaderCompressionError, HeaderDecoder, encode_headers

from .load_error import ServerUnreachable
from .target import Target

__all__ = ["GrpcCallFailed", "GrpcH2Connection"]

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PING, _GOAWAY, _WINDOW_UPDATE, _CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
_END_STREAM, _ACK, _END_HEADERS, _PADDED, _PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
_FRAME = struct.Struct(">BHBBL")  # length as 8 + 16 bits, type, flags, stream id
_U32 = struct.Struct(">L")
_SETTING = struct.Struct(">HL")
_MAX_WINDOW = 2**31 - 1
_INITIAL_WINDOW, _MAX_FRAME_SIZE = 0x4, 0x5
# Our receive window is opened to the maximum at once, and topped up after this many bytes.
_TOP_UP = 1 << 30


def _frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return _FRAME.pack(len(payload) >> 16, len(payload) & 0xFFFF, kind, flags, stream_id) + payload


class GrpcCallFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class GrpcH2Connection(asyncio.Protocol):
    def __init__(self, target: Target, method_path: str) -> None:
        self._target = target
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", urllib.parse.quote(method_path)),
            (":authority", str(target)),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
        self._block = encode_headers(headers)
        self._decoder = HeaderDecoder()
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._next_stream = 1
        self._stream = 0
        self._waiter: asyncio.Future[int] | None = None
        self._first_byte_ns = 0
        self._status = ""
        self._grpc_status: str | None = None
        self._grpc_message = ""
        self._header_block = bytearray()
        self._header_flags = 0
        # What the server lets us send: its windows and frame size (RFC defaults until its SETTINGS).
        self._send_connection_window = 65_535
        self._stream_initial_window = 65_535
        self._send_stream_window = 0
        self._max_frame = 16_384
        self._unsent = memoryview(b"")
        self._received = 0
        self._lost: Exception | None = None

    @classmethod
    async def open(cls, target: Target, method_path: str) -> GrpcH2Connection:
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await loop.create_connection(lambda: cls(target, method_path), target.host, target.port)
        except OSError as exc:
            raise ServerUnreachable(f"cannot reach the server at {target}: {exc.strerror or exc}") from None
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        settings = _SETTING.pack(0x2, 0) + _SETTING.pack(_INITIAL_WINDOW, _MAX_WINDOW)  # no push; wide windows
        self._transport.write(
            _PREFACE + _frame(_SETTINGS, 0, 0, settings) + _frame(_WINDOW_UPDATE, 0, 0, _U32.pack(_MAX_WINDOW - 65_535))
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._fail(ConnectionResetError(f"the server closed the connection{f': {exc}' if exc else ''}"))

    @property
    def is_open(self) -> bool:
        return self._transport is not None and self._next_stream < _MAX_WINDOW

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def call(self, message: bytes) -> asyncio.Future[int]:
        """Send one unary call whose request message is `message`; the future is the time its
        answer's first bytes came (perf_counter_ns), GrpcCallFailed for a non-OK status,
        ConnectionError when the connection goes."""
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        if self._transport is None:
            waiter.set_exception(self._lost or ConnectionResetError("the connection is closed"))
            return waiter
        stream = self._stream = self._next_stream
        self._next_stream += 2
        self._first_byte_ns = 0
        self._status = ""
        self._grpc_status = None
        self._grpc_message = ""
        self._send_stream_window = self._stream_initial_window
        payload = b"\x00" + _U32.pack(len(message)) + message
        head = _frame(_HEADERS, _END_HEADERS, stream, self._block)
        if len(payload) <= min(self._send_connection_window, self._send_stream_window, self._max_frame):
            # The usual case: the whole call in one write.
            self._send_connection_window -= len(payload)
            self._send_stream_window -= len(payload)
            self._transport.write(head + _frame(_DATA, _END_STREAM, stream, payload))
        else:
            self._transport.write(head)
            self._unsent = memoryview(payload)
            self._send_allowed()
        return waiter

    def _send_allowed(self) -> None:
        """As much of the unsent message as the server's windows allow, in frames it accepts."""
        transport = self._transport
        while self._unsent and transport is not None:
            size = min(len(self._unsent), self._send_connection_window, self._send_stream_window, self._max_frame)
            if size <= 0:
                return
            chunk, self._unsent = self._unsent[:size], self._unsent[size:]
            self._send_connection_window -= size
            self._send_stream_window -= size
            transport.write(_frame(_DATA, 0 if self._unsent else _END_STREAM, self._stream, bytes(chunk)))

    def data_received(self, data: bytes) -> None:
        if not self._first_byte_ns:
            self._first_byte_ns = time.perf_counter_ns()
        buffer = self._buffer
        buffer += data
        at = 0
        try:
            while len(buffer) - at >= 9:
                high, low, kind, flags, stream = _FRAME.unpack_from(buffer, at)
                length = (high << 16) | low
                end = at + 9 + length
                if end > len(buffer):
                    break
                self._frame_received(kind, flags, stream & _MAX_WINDOW, bytes(buffer[at + 9 : end]))
                at = end
        except (HeaderCompressionError, ValueError, struct.error) as exc:
            self._fail(ConnectionError(f"the server's HTTP/2 is not readable: {exc}"))
            self.close()
        del buffer[:at]

    def _frame_received(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        if kind == _DATA:
            self._received += len(payload)
            if self._received >= _TOP_UP and self._transport is not None:
                self._transport.write(_frame(_WINDOW_UPDATE, 0, 0, _U32.pack(self._received)))
                self._received = 0
            if stream == self._stream and flags & _END_STREAM:
                self._finish()
        elif kind in (_HEADERS, _CONTINUATION):
            if kind == _HEADERS:
                self._header_block = bytearray(_unpadded(payload, flags, headers=True))
                self._header_flags = flags
            else:
                self._header_block += payload
            if flags & _END_HEADERS:
                fields = self._decoder.decode(bytes(self._header_block))
                if stream == self._stream:
                    self._read_fields(fields)
                    if self._header_flags & _END_STREAM:
                        self._finish()
        elif kind == _SETTINGS:
            if not flags & _ACK:
                self._settings(payload)
        elif kind == _WINDOW_UPDATE:
            increment = _U32.unpack(payload)[0] & _MAX_WINDOW
            if stream == 0:
                self._send_connection_window += increment
            elif stream == self._stream:
                self._send_stream_window += increment
            self._send_allowed()
        elif kind == _PING:
            if not flags & _ACK and self._transport is not None:
                self._transport.write(_frame(_PING, _ACK, 0, payload))
        elif kind == _RST_STREAM:
            if stream == self._stream:
                self._fail(ConnectionError(f"the server reset the call (HTTP/2 error {_U32.unpack(payload)[0]})"))
        elif kind == _GOAWAY:
            self._next_stream = _MAX_WINDOW  # no new calls on this connection
            last = _U32.unpack_from(payload)[0] & _MAX_WINDOW
            if self._stream > last:
                self._fail(ConnectionResetError("the server is closing the connection (GOAWAY)"))

    def _settings(self, payload: bytes) -> None:
        for at in range(0, len(payload) - 5, 6):
            key, value = _SETTING.unpack_from(payload, at)
            if key == _INITIAL_WINDOW:
                self._send_stream_window += value - self._stream_initial_window
                self._stream_initial_window = value
            elif key == _MAX_FRAME_SIZE:
                self._max_frame = value
        if self._transport is not None:
            self._transport.write(_frame(_SETTINGS, _ACK, 0))
        self._send_allowed()

    def _read_fields(self, fields: list[tuple[str, str]]) -> None:
        for name, value in fields:
            if name == ":status":
                self._status = value
            elif name == "grpc-status":
                self._grpc_status = value
            elif name == "grpc-message":
                self._grpc_message = urllib.parse.unquote(value)

    def _finish(self) -> None:
        waiter = self._waiter
        self._stream = 0
        if waiter is None or waiter.done():
            return
        if self._status != "200":
            waiter.set_exception(GrpcCallFailed(f"HTTP status {self._status or 'missing'} to a gRPC call"))
        elif self._grpc_status != "0":
            waiter.set_exception(GrpcCallFailed(_status_text(self._grpc_status, self._grpc_message)))
        else:
            waiter.set_result(self._first_byte_ns)
        self._first_byte_ns = 0

    def _fail(self, error: Exception) -> None:
        self._lost = error
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)


def _unpadded(payload: bytes, flags: int, headers: bool = False) -> bytes:
    start, end = 0, len(payload)
    if flags & _PADDED:
        start, end = 1, end - payload[0]
    if headers and flags & _PRIORITY:
        start += 5
    return payload[start:end]


def _status_text(code: str | None, message: str) -> str:
    """As grpc.aio words a failed call: `INVALID_ARGUMENT: the server's message`."""
    try:
        name = StatusCode(int(code or "")).name
    except ValueError:
        name = f"gRPC status {code or 'missing'}"
    return f"{name}: {message}" if message else name
