"""A front door's connection to the model home: requests out, responses and the model table in.

One Unix stream socket per front door carries framed messages
(naiad_wire.interprocess.messages), two shared-memory rings the front door creates carry
their tensors (one each way; their file descriptors cross once, in the first message, with
SCM_RIGHTS). Requests are multiplexed by a key the front door picks. Responses are
dispatched from `data_received`: a result resumes the request awaiting it with no task in
between. The model home sends its model table, numbered, first and after every change; the
front door confirms each number it applied, so that a load or unload answers its client only
once every front door shows the change.

When the model home goes away (it crashed and is being started again), every request waiting
on it fails at once with UNAVAILABLE, and the front door connects again when it is back.
"""

from __future__ import annotations

import array
import asyncio
import itertools
import logging
import os
import socket
import struct
from typing import Any, cast

from naiad_wire.interprocess.coalesced_writes import CoalescedWrites
from naiad_wire.interprocess.messages import FrameReader, pack_frame, unpack_message
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd

from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from .model_mirror import ModelMirror
from .request_messages import pack_request, unpack_error, unpack_response

__all__ = ["HomeLink", "HELLO", "send_hello", "receive_hello"]

log = logging.getLogger("naiad.workers")

# The first message on a connection: the front door's index; its two ring descriptors ride
# along (requests' ring, then responses' ring).
HELLO = struct.Struct("<i")

# What a request waits on: one response, or a stream of them.
_Waiter = asyncio.Future[InferenceResponse] | asyncio.Queue["InferenceResponse | NaiadError"]


def send_hello(sock: socket.socket, index: int, ring_fds: tuple[int, int]) -> None:
    sock.sendmsg([HELLO.pack(index)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", ring_fds))])


def receive_hello(sock: socket.socket) -> tuple[int, tuple[int, int]]:
    """(front door index, (requests' ring fd, responses' ring fd)); raises ValueError for
    anything else (the caller closes the connection)."""
    data, fds, _, _ = socket.recv_fds(sock, HELLO.size, 2)
    if len(data) != HELLO.size or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        raise ValueError("not a front door's hello")
    (index,) = HELLO.unpack(data)
    return index, (fds[0], fds[1])


class HomeLink(asyncio.Protocol):
    """Connect with `HomeLink.connect`; then `infer`, `stream`, `control`."""

    def __init__(self, mirror: ModelMirror, requests: RingWriter, responses: RingReader) -> None:
        self._mirror = mirror
        self._requests = requests
        self._responses = responses
        self._frames = FrameReader()
        self._keys = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._answers: dict[int, asyncio.Future[Any]] = {}
        self._transport: asyncio.Transport | None = None
        self._out: CoalescedWrites | None = None
        self._loop = loop = asyncio.get_running_loop()
        # Done once the model home's table has arrived (it sends it first), and once the
        # connection is gone.
        self.table_arrived: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()

    @classmethod
    async def connect(cls, path: str, index: int, ring_bytes: int, mirror: ModelMirror) -> HomeLink:
        """A link to the model home listening at `path`; raises OSError when it does not
        listen (yet)."""
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ring_fds = (create_ring_fd(ring_bytes), create_ring_fd(ring_bytes))
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, path)
            sock.setblocking(True)
            send_hello(sock, index, ring_fds)
            sock.setblocking(False)
            link = cls(mirror, RingWriter(ring_fds[0]), RingReader(ring_fds[1]))
        except BaseException:
            sock.close()
            raise
        finally:
            for fd in ring_fds:
                os.close(fd)
        await loop.create_unix_connection(lambda: link, sock=sock)
        return link

    # -- requests ---------------------------------------------------------------------------

    def infer(self, request: InferenceRequest) -> tuple[int, asyncio.Future[InferenceResponse]]:
        """Send a request; its one response (or error) completes the future."""
        future: asyncio.Future[InferenceResponse] = self._loop.create_future()
        return self._send(request, False, future), future

    def stream(self, request: InferenceRequest) -> tuple[int, asyncio.Queue[InferenceResponse | NaiadError]]:
        """Send a request whose responses (ending with a final one) or error arrive in the queue."""
        queue: asyncio.Queue[InferenceResponse | NaiadError] = asyncio.Queue()
        return self._send(request, True, queue), queue

    def _send(self, request: InferenceRequest, stream: bool, waiter: _Waiter) -> int:
        out = self._writer()
        key = next(self._keys)
        with self._requests.lock:
            out.write(pack_request(key, request, stream, self._requests))
        self._waiting[key] = waiter
        return key

    def _writer(self) -> CoalescedWrites:
        if self._out is None or self.lost.done():
            raise NaiadError.unavailable("the model home is not reachable (it may be restarting)")
        return self._out

    def cancel(self, key: int) -> None:
        """The client gave up on request `key`: the model home drops it."""
        if self._waiting.pop(key, None) is not None and self._out is not None:
            self._out.write(pack_frame({"op": "cancel", "key": key}))

    async def control(self, operation: str, *arguments: Any) -> None:
        """A model load or unload in the model home; returns once it is applied and this
        front door's copy of the model table shows it (the table comes first on the socket)."""
        out = self._writer()
        key = next(self._keys)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._answers[key] = future
        out.write(pack_frame({"op": "control", "key": key, "operation": operation, "arguments": arguments}))
        await future

    # -- the protocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not a check: uvloop's transports do not subclass asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)
        self._out = CoalescedWrites(self._transport, self._loop)

    def data_received(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            try:
                self._dispatch(unpack_message(body))
            except Exception:  # noqa: BLE001 - one bad message must not stop the others
                log.exception("a message from the model home could not be read")

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message["op"]
        if op == "response":
            key = message["key"]
            try:
                response = unpack_response(message, self._responses)
            except Exception as exc:  # noqa: BLE001 - the request fails, not the link
                log.exception("an answer from the model home could not be read")
                error = NaiadError.internal(f"the model home's answer could not be read: {type(exc).__name__}: {exc}")
                self._fail(self._waiting.pop(key, None), error)
                return
            finally:
                self._responses.consumed(message.get("mark"))
            waiter = self._waiting.get(key) if not response.final else self._waiting.pop(key, None)
            if isinstance(waiter, asyncio.Queue):
                waiter.put_nowait(response)
            elif waiter is not None and not waiter.done():
                if response.error is not None:
                    waiter.set_exception(response.error)
                else:
                    waiter.set_result(response)
        elif op == "error":
            self._fail(self._waiting.pop(message["key"], None), unpack_error(message["error"]))
        elif op == "models":
            self._mirror.update(message["table"])
            if not self.table_arrived.done():
                self.table_arrived.set_result(None)
            # A load or unload answers its client once every front door has confirmed.
            if self._out is not None:
                self._out.write(pack_frame({"op": "table_applied", "number": message["number"]}))
        elif op == "answer":
            future = self._answers.pop(message["key"], None)
            if future is not None and not future.done():
                error = message.get("error")
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(unpack_error(error))

    @staticmethod
    def _fail(waiter: _Waiter | None, error: NaiadError) -> None:
        if isinstance(waiter, asyncio.Queue):
            waiter.put_nowait(error)
        elif waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = "the model home exited (it is being started again)"
        self._mirror.lost(reason)
        error = NaiadError.unavailable(f"the request was not answered: {reason}")
        for waiter in self._waiting.values():
            self._fail(waiter, error)
        for future in self._answers.values():
            if not future.done():
                future.set_exception(error)
        self._waiting.clear()
        self._answers.clear()
        self._requests.close()
        self._responses.close()
        if not self.table_arrived.done():
            self.table_arrived.set_exception(error)
        if not self.lost.done():
            self.lost.set_result(None)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
