"""`Channel`: the model process's socket to the server and its two shared-memory rings,
shared by every thread of the process.

Model code may block waiting for the server (a BLS call, `is_cancelled`, a custom metric,
model control), on the process's one serving thread or on a thread of its own. Whoever waits
reads the socket itself while nobody else does (`Channel.wait_until`), so a reply is never
stuck behind a busy thread; what it reads goes to `dispatch`, which hands replies and work
to their owner.

When the server closes the socket (it went away), the process leaves at once, even while
model code is stuck in `execute` (`watch_for_hang_up`).

The event loop's reader (libuv's poll handle under uvloop) switches the socket to non-blocking
mode, so a send finds the socket's buffer full whenever the server is slower to read than this
process is to answer: every send waits for room (`_send_all`) instead of failing half-way
through a frame, which would lose that batch's answers and tear the stream.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn

from naiad_wire.interprocess.messages import FrameReader
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter

from .stub_messages import StubMessage, pack, pack_placing, unpack

__all__ = ["Channel", "leave", "server_gone", "watch_for_hang_up"]

_READ_BYTES = 1 << 16


class Channel:
    """Reading has one holder at a time: the event loop when the socket becomes readable, or
    a thread waiting for a reply (`wait_until`). The holder decodes every message it reads and
    hands it to `dispatch`; giving the role back wakes the other waiters to look again."""

    def __init__(self, sock: socket.socket, inbound: RingReader, outbound: RingWriter) -> None:
        self.sock = sock
        self.inbound = inbound
        self.outbound = outbound
        self.dispatch: Callable[[StubMessage], None] = lambda message: None
        self._frames = FrameReader()
        self._turn = threading.Condition(threading.Lock())
        self._reading = False
        self._waiting = 0  # threads waiting on _turn: giving the role back wakes them
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)
        self._room = select.poll()  # used under outbound.lock only
        self._room.register(sock.fileno(), select.POLLOUT)

    def send(self, message: StubMessage) -> None:
        """Send a message without tensors (from any thread)."""
        with self.outbound.lock:
            self._send_all(pack(message))

    def send_with(self, build: Callable[[RingWriter], StubMessage]) -> None:
        """Build a message that places tensors in the ring and send it, atomically."""
        with self.outbound.lock:
            self._send_all(pack_placing(build, self.outbound))

    def try_send(self, message: StubMessage) -> bool:
        """Send a message without tensors unless another send holds the socket right now:
        for callers that must never block (a `__del__` run by garbage collection, which may
        be inside a send of the same thread). False when it did not send."""
        lock = self.outbound.lock
        if not lock.acquire(blocking=False):
            return False
        try:
            self._send_all(pack(message))
        finally:
            lock.release()
        return True

    def _send_all(self, frame: bytes) -> None:
        """Send the whole frame, waiting for room in the socket's buffer when it is full
        (`sendall` on a non-blocking socket raises without saying how much it sent). Call
        under `outbound.lock`. The server reads on its event loop, never waiting for this
        process to read, so waiting here cannot deadlock."""
        rest = memoryview(frame)
        while True:
            try:
                sent = self.sock.send(rest)
            except BlockingIOError:
                sent = 0
            if sent == len(rest):  # the common case: the whole frame at once
                return
            rest = rest[sent:]
            self._room.poll()

    def read_ready(self) -> None:
        """The loop's reader callback: take what the socket holds. When a waiting thread is
        reading right now, wait for it to finish its read (it is taking the very bytes that
        woke the loop); returning at once would have the loop spin on a readable socket."""
        with self._turn:
            while self._reading:
                self._wait_turn(None)
            self._reading = True
        try:
            self._read(wait_s=0.0)
        finally:
            self._give_back()

    def wait_until(self, done: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until `done()`, reading the socket whenever nobody else does. False when
        `timeout` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._turn:
                while True:
                    if done():
                        return True
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    if not self._reading:
                        self._reading = True
                        break
                    self._wait_turn(remaining)
            try:
                if not done():
                    self._read(wait_s=remaining)
            finally:
                self._give_back()

    def _wait_turn(self, timeout: float | None) -> None:
        """Wait for the read role to be given back; call holding `_turn`."""
        self._waiting += 1
        try:
            self._turn.wait(timeout)
        finally:
            self._waiting -= 1

    def _give_back(self) -> None:
        with self._turn:
            self._reading = False
            if self._waiting:  # the common case, the loop reading alone, notifies nobody
                self._turn.notify_all()

    def _read(self, wait_s: float | None) -> None:
        if wait_s != 0.0 and not self._poll.poll(None if wait_s is None else max(1, int(wait_s * 1000))):
            return
        try:
            data = self.sock.recv(_READ_BYTES, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            server_gone()
        for body in self._frames.feed(data):
            self.dispatch(unpack(body))


def server_gone() -> None:
    """The server went away (after a finalize this process has already exited itself). Leave
    now, even if model code is stuck in execute: nobody can use its answers any more.
    (PR_SET_PDEATHSIG would not do: it fires when the *thread* that spawned us exits.)"""
    leave(0)


def leave(code: int) -> NoReturn:
    """End the process now with `code`, what it printed flushed: model threads may still run,
    and nothing they do can reach the server any more. A stream model code closed or broke
    makes its flush raise; the process leaves all the same."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def watch_for_hang_up(sock: socket.socket) -> None:
    """A daemon thread's body: wakes only when the server closes the socket, so the process
    goes even while its one serving thread is stuck in model code."""
    watcher = select.poll()
    watcher.register(sock.fileno(), select.POLLRDHUP)
    while True:
        for _, events in watcher.poll():
            if events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                server_gone()
