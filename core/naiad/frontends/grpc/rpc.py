"""gRPC calls on naiad_wire's HTTP/2 streams: the gRPC-over-HTTP/2 protocol (deadlines,
status trailers, metadata; messages framed by `naiad_wire.grpc_framing`) around servicer
methods.

A servicer method has grpc.aio's shape, `method(request_or_iterator, context)`, returning a
message or async-yielding them. The `Call` object is the context: `invocation_metadata()`,
`abort(code, details)`, `time_remaining()`. A method ends the call with a status by raising
`RpcError`, or a `NaiadError` (its gRPC status per `errors.GRPC_STATUS_NAME`); anything else
becomes INTERNAL and is logged, and the connection keeps serving.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from google.protobuf.message import DecodeError, Message

from naiad_wire.grpc_framing import (
    ACCEPT_ENCODING,
    ENCODINGS,
    decompress,
    frame_message,
    message_at,
    message_length,
    parse_timeout,
    percent_encode,
)
from naiad_wire.grpc_status import RpcError, StatusCode
from naiad_wire.header_compression import encode_headers
from naiad_wire.http2 import Stream

from ...errors import GRPC_STATUS_NAME, NaiadError
from .field_views import split_field

__all__ = ["RpcMethod", "RpcSettings", "RpcDispatcher", "Call"]

log = logging.getLogger("naiad.grpc")

# Request headers that are the protocol's, not the application's metadata.
_RESERVED = frozenset({"content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "content-length"})
# A message this large has its `in_place_field` read in place: below it, the copies cost
# less than walking the message.
_IN_PLACE_MIN = 32 << 10
# DATA this large is kept as its own object until the message is whole; smaller pieces are
# gathered into one buffer.
_OWN_PART = 4 << 10
# How long a client-streaming call's messages are handed to its method before the event loop
# serves everyone else.
_TURN_S = 0.001

_HEADERS = encode_headers([(":status", "200"), ("content-type", "application/grpc")])
# Response headers by the response's grpc-encoding (None: uncompressed).
_HEADERS_FOR: dict[str | None, bytes] = {None: _HEADERS} | {
    name: encode_headers([(":status", "200"), ("content-type", "application/grpc"), ("grpc-encoding", name)])
    for name in ENCODINGS
}
_OK_TRAILERS = encode_headers([("grpc-status", "0")])
# Answers to requests that are not gRPC: (header block, body).
_NOT_POST = (
    encode_headers([(":status", "405"), ("allow", "POST"), ("content-type", "text/plain")]),
    b"This is a gRPC server: calls are POST requests.\n",
)
_NOT_GRPC = (
    encode_headers([(":status", "415"), ("content-type", "text/plain")]),
    b"This is a gRPC server: requests have content-type application/grpc.\n",
)


@dataclass(frozen=True)
class RpcMethod:
    name: str  # "/package.Service/Method", for logs
    implementation: Callable[[Any, Call], Any]
    request_type: type[Message]
    client_streaming: bool = False
    server_streaming: bool = False
    # A bytes field (its number) a large request message hands over as views of the received
    # message (`Call.in_place`), not parsed into it: big tensors are not copied twice more.
    in_place_field: int = 0


@dataclass
class RpcSettings:
    max_receive_size: int = 2**31 - 1
    max_send_size: int = 2**31 - 1
    compression_level: int = 0  # zlib level for responses (0: uncompressed)


def status_of(error: NaiadError) -> StatusCode:
    return StatusCode[GRPC_STATUS_NAME[error.code]]


class RpcDispatcher:
    """`on_request` for `Http2Connection`: one `Call` per request stream."""

    def __init__(self, methods: dict[str, RpcMethod], settings: RpcSettings) -> None:
        self.methods = methods
        self.settings = settings
        self.calls: set[Call] = set()

    def __call__(self, stream: Stream, headers: list[tuple[str, str]], end_stream: bool) -> Call:
        path = method = content_type = encoding = accept = None
        timeout = None
        metadata: list[tuple[str, str | bytes]] = []
        for name, value in headers:
            if name[0] == ":":
                if name == ":path":
                    path = value
                elif name == ":method":
                    method = value
            elif name in _RESERVED:
                if name == "content-type":
                    content_type = value
                elif name == "grpc-timeout":
                    timeout = parse_timeout(value)
                elif name == "grpc-encoding":
                    encoding = value
                elif name == "grpc-accept-encoding":
                    accept = value
            elif name.endswith("-bin"):
                try:
                    metadata.append((name, base64.b64decode(value + "==")))
                except ValueError:
                    pass
            else:
                metadata.append((name, value))
        call = Call(self, stream, self.methods.get(path or ""), tuple(metadata))
        if method != "POST" or not (content_type or "").startswith("application/grpc"):
            # Not a gRPC request (a browser, curl, a plain HTTP/2 client): HTTP's own answer,
            # once the request has ended, so that its body is checked like any other.
            call._http_answer = _NOT_POST if method != "POST" else _NOT_GRPC
            call._head_request = method == "HEAD"
            if end_stream:
                call.data_received(b"", True)
            return call
        if call.method is None:
            call.end(StatusCode.UNIMPLEMENTED, f"Method not found: {path}")
            return call
        if encoding not in (None, "identity") and encoding not in ENCODINGS:
            call.end(StatusCode.UNIMPLEMENTED, f"Compression algorithm '{encoding}' is not supported")
            return call
        call.start(encoding, accept, timeout, end_stream)
        return call


class Call:
    """One gRPC call: the StreamEvents of its HTTP/2 stream, and the servicer's context."""

    __slots__ = (
        "dispatcher",
        "stream",
        "method",
        "metadata",
        "_encoding",
        "_response_encoding",
        "_buffer",
        "_parts",
        "_size",
        "_need",
        "_request",
        "in_place",
        "_task",
        "_deadline",
        "_deadline_timer",
        "_deadline_hit",
        "_headers_sent",
        "_done",
        "_http_answer",
        "_head_request",
        "_streaming",
        "_received",
        "_ended",
        "_more",
    )

    def __init__(self, dispatcher: RpcDispatcher, stream: Stream, method: RpcMethod | None, metadata: tuple) -> None:
        self.dispatcher = dispatcher
        self.stream = stream
        self.method = method
        self.metadata = metadata
        self._encoding: str | None = None
        self._response_encoding: str | None = None
        self._buffer = bytearray()  # a client-streaming call's unread messages
        # A unary request's DATA received so far, joined once it holds the whole message (a
        # buffer grown frame by frame copies the message several times), and how many bytes
        # that message takes (0: its 5-byte prefix has not arrived).
        self._parts: list[bytes | bytearray] = []
        self._size = 0
        self._need = 0
        self._request: Message | None = None
        # The `in_place_field` payloads of the message read last, when it was large enough to
        # read them in place (a client-streaming method takes them with each message).
        self.in_place: list[memoryview] | None = None
        self._streaming = False  # client streaming: the fields below are the messages' reader's
        self._received = 0
        self._ended = False
        self._more: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._deadline: float | None = None
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._deadline_hit = False
        self._headers_sent = False
        self._done = False
        self._http_answer: tuple[bytes, bytes] | None = None
        self._head_request = False

    # -- the servicer's context --------------------------------------------------------------

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self.metadata

    async def abort(self, code: StatusCode, details: str = "") -> NoReturn:
        raise RpcError(code, details)

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def done(self) -> bool:
        return self._done

    # -- start and receive -------------------------------------------------------------------

    def start(self, encoding: str | None, accept: str | None, timeout: float | None, end_stream: bool) -> None:
        self._encoding = encoding if encoding in ENCODINGS else None
        level = self.dispatcher.settings.compression_level
        if level and accept:
            offered = {item.strip() for item in accept.split(",")}
            self._response_encoding = next((name for name in ("gzip", "deflate") if name in offered), None)
        self.dispatcher.calls.add(self)
        loop = asyncio.get_running_loop()
        if timeout is not None:
            self._deadline = time.monotonic() + timeout
            self._deadline_timer = loop.call_later(timeout, self._deadline_exceeded)
        assert self.method is not None
        if self.method.client_streaming:
            # Messages are parsed as the method asks for them, and the stream's flow-control
            # window reopens only as they are taken: a client that sends faster than the
            # method reads waits, instead of filling the server with parsed messages.
            self._streaming = True
            self.stream.manual_acknowledgement = True
            self._task = loop.create_task(self._run(_RequestMessages(self)))
        if end_stream:
            self.data_received(b"", True)

    def data_received(self, data: bytes, end_stream: bool) -> None:
        if self._done:
            return
        if self._http_answer is not None:
            if end_stream:  # the body of a request that is not gRPC is read and dropped
                self._finish()
                headers, body = self._http_answer
                self.stream.send_headers(headers)
                self.stream.send_data(b"" if self._head_request else body, end_stream=True)
            return
        if self.method is None:
            return
        if self._streaming:
            self._buffer += data
            self._received += len(data)
            self._ended = end_stream
            if self._more is not None and not self._more.done():
                self._more.set_result(None)
            return
        if data:
            try:
                self._unary_data(data)
            except RpcError as exc:
                self.end(exc.code, exc.details)
                return
        if not end_stream:
            return
        if self._parts:
            self.end(StatusCode.INTERNAL, "the request ended inside a message")
        elif self._request is None:
            self.end(StatusCode.UNIMPLEMENTED, "the request carried no message")
        else:
            request, self._request = self._request, None
            self._task = asyncio.get_running_loop().create_task(self._run(request))

    def _unary_data(self, data: bytes) -> None:
        """Take a unary request's DATA; parse its message once all of it is here."""
        if self._request is not None:
            # gRPC's cardinality rule: a unary request is exactly one message.
            raise RpcError(StatusCode.INTERNAL, "more than one request message for a unary RPC")
        parts = self._parts
        if len(data) >= _OWN_PART:
            parts.append(data)
        elif parts and type(parts[-1]) is bytearray:
            parts[-1] += data  # a client's tiny frames must not each cost the server an object
        else:
            parts.append(bytearray(data))
        self._size += len(data)
        if not self._need:
            if self._size < 5:
                return
            if len(parts[0]) < 5:
                parts[:] = [b"".join(parts)]
            self._need = 5 + message_length(parts[0], 0, self.dispatcher.settings.max_receive_size)
        if self._size < self._need:
            return
        whole = parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()
        self._request, used = self._message_at(whole, 0)
        if used < len(whole):
            raise RpcError(StatusCode.INTERNAL, "more than one request message for a unary RPC")

    def _message_at(self, data: bytes | bytearray, position: int) -> tuple[Message | None, int]:
        """The message that starts at `position` of `data` and where the next one starts, or
        (None, position) while it is incomplete. Read in place: no copy of what follows."""
        limit = self.dispatcher.settings.max_receive_size
        payload, compressed, end = message_at(data, position, limit)
        if payload is None:
            return None, position
        method = self.method
        assert method is not None
        try:
            encoded: bytes | memoryview = decompress(payload, self._encoding, limit) if compressed else payload
            if method.in_place_field and len(encoded) >= _IN_PLACE_MIN:
                # Views of an immutable message only: a buffer that is reused would change under
                # them. A client-streaming call's messages wait in one such buffer (a unary one's
                # tiny frames in another): the message is copied out of it once, where the parser
                # would copy it twice and each tensor once more.
                source, start, stop = (encoded, 0, len(encoded)) if compressed else (data, position + 5, end)
                if type(source) is not bytes:
                    source, start, stop = bytes(encoded), 0, len(encoded)
                taken = split_field(source, start, stop, method.in_place_field)
                if taken is not None:
                    rest, self.in_place = taken
                    encoded = rest
            message = method.request_type.FromString(encoded)
        except DecodeError as exc:
            raise RpcError(StatusCode.INTERNAL, f"failed to parse the request message: {exc}") from None
        finally:
            payload.release()
        return message, end

    def stream_reset(self) -> None:
        """The client cancelled (RST_STREAM) or went away: stop the work."""
        self._finish()
        if self._task is not None:
            self._task.cancel()

    # -- run and answer ----------------------------------------------------------------------

    async def _run(self, argument: Any) -> None:
        method = self.method
        assert method is not None
        try:
            if method.server_streaming:
                async for response in method.implementation(argument, self):
                    if self._done:
                        return
                    self._send_message(response)
                    stream = self.stream
                    if stream.pending or stream.connection.paused:
                        await stream.drained()  # a slow reader: do not buffer without bound
                self.end(StatusCode.OK, "")
            else:
                response = await method.implementation(argument, self)
                if not self._done:
                    self._respond(response)
        # One name per exception type: mypyc gives a name one type in a function.
        except RpcError as rpc_error:
            self.end(rpc_error.code, rpc_error.details)
        except NaiadError as error:
            self.end(status_of(error), error.message)
        except asyncio.CancelledError:
            if self._deadline_hit:
                self.end(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
            else:
                self.end(StatusCode.CANCELLED, "the call was cancelled")
        except Exception as exc:  # noqa: BLE001 - a bug in one call must not end the connection
            log.exception("gRPC method %s failed", method.name)
            self.end(StatusCode.INTERNAL, NaiadError.unexpected(exc).message)

    def _encode(self, response: Message) -> bytes:
        settings = self.dispatcher.settings
        return frame_message(
            response.SerializeToString(), settings.max_send_size, self._response_encoding, settings.compression_level
        )

    def _respond(self, response: Message) -> None:
        try:
            message = self._encode(response)
        except RpcError as exc:
            self.end(exc.code, exc.details)
            return
        self._finish()
        self.stream.respond(_HEADERS_FOR[self._response_encoding], message, _OK_TRAILERS)

    def _send_message(self, response: Message) -> None:
        message = self._encode(response)
        if not self._headers_sent:
            self._headers_sent = True
            self.stream.send_headers(_HEADERS_FOR[self._response_encoding])
        self.stream.send_data(message)

    def end(self, code: StatusCode, details: str) -> None:
        """Finish the call with a status (trailers, or trailers-only before any message)."""
        if self._done:
            return
        self._finish()
        fields = [("grpc-status", str(int(code)))]
        if details:
            fields.append(("grpc-message", percent_encode(details)))
        if code == StatusCode.UNIMPLEMENTED and details.startswith("Compression"):
            fields.append(("grpc-accept-encoding", ACCEPT_ENCODING))
        if not self._headers_sent:  # trailers-only
            fields = [(":status", "200"), ("content-type", "application/grpc"), *fields]
        self.stream.send_headers(encode_headers(fields), end_stream=True)

    def _finish(self) -> None:
        self._done = True
        self.dispatcher.calls.discard(self)
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None

    def _deadline_exceeded(self) -> None:
        self._deadline_hit = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        else:
            self.end(StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")


class _RequestMessages:
    """The messages of a client-streaming call, parsed one at a time as they are asked for.
    An async iterator rather than an async generator, which mypyc cannot compile."""

    def __init__(self, call: Call) -> None:
        self._call = call
        self._position = 0  # in the call's buffer
        self._consumed = self._acknowledged = 0  # in the stream's bytes
        self._turn_ends = time.perf_counter() + _TURN_S
        self._returned = False

    def __aiter__(self) -> _RequestMessages:
        return self

    async def __anext__(self) -> Message:
        call = self._call
        if self._returned:
            self._returned = False
            if time.perf_counter() > self._turn_ends:
                # One frame can hold thousands of small messages: every other connection
                # runs before this one's next millisecond of work.
                await asyncio.sleep(0)
                self._turn_ends = time.perf_counter() + _TURN_S
        while True:
            buffer = call._buffer
            message, end = call._message_at(buffer, self._position)
            if message is not None:
                self._consumed += end - self._position
                self._position = end
                if self._consumed > self._acknowledged:
                    call.stream.acknowledge(self._consumed - self._acknowledged)
                    self._acknowledged = self._consumed
                self._returned = True
                return message
            if self._position:  # drop what was read, once per wait rather than once per message
                del buffer[: self._position]
                self._position = 0
            if call._ended:
                if buffer:
                    raise RpcError(StatusCode.INTERNAL, "the request ended inside a message")
                raise StopAsyncIteration
            # An incomplete message: let the rest of it in, whatever its size.
            if call._received > self._acknowledged:
                call.stream.acknowledge(call._received - self._acknowledged)
                self._acknowledged = call._received
            call._more = asyncio.get_running_loop().create_future()
            await call._more
            self._turn_ends = time.perf_counter() + _TURN_S
