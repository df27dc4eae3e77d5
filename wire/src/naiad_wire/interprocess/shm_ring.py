"""Shared-memory rings that carry tensor bytes between two processes of one server (a front
door and the model home, the model home and a Python model's process).

Each direction has its own ring (a memfd one process creates and hands the other) with
one writer and one reader. The writer copies a message's tensors into the ring, then
sends the small control message (which names each tensor's place) over the socket; the
reader copies the tensors out and publishes how far it has consumed in the ring's header.
Because messages are read in the order they are written, that one number frees every
earlier byte: no allocator, no per-tensor handshakes, no syscalls for the tensor data.

A tensor that does not fit in the free part of the ring goes into its own file under
/dev/shm, which the reader deletes once it has copied it; nothing ever waits for space,
so two sides that both write can never deadlock.
"""

from __future__ import annotations

import collections
import itertools
import mmap
import os
import struct
import tempfile
import threading
import weakref
from typing import Any

import numpy as np

__all__ = ["HEADER_BYTES", "RingWriter", "RingReader", "create_ring_fd", "remove_segments_of", "SEGMENT_PREFIX"]

# The header holds the reader's consumed position (uint64 at offset 0); 64 bytes keeps the
# data region cache-line aligned.
HEADER_BYTES = 64
SEGMENT_PREFIX = "naiad-ring-"
# Tensors this large are read in place rather than copied (a copy of a small tensor is
# cheaper than tracking its lifetime).
ZERO_COPY_BYTES = 64 * 1024
_ALIGN = 64
_counter = itertools.count()


def create_ring_fd(byte_size: int) -> int:
    """An anonymous shared-memory file of `byte_size` data bytes plus the header."""
    byte_size += -byte_size % _ALIGN
    fd = os.memfd_create("naiad-ring", 0)
    os.ftruncate(fd, HEADER_BYTES + byte_size)
    return fd


def _segment_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class RingWriter:
    """The writing side of one ring. `put` and `mark` must be called under the caller's
    send lock so ring order is socket order."""

    def __init__(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        self._map = mmap.mmap(fd, size)
        self._capacity = size - HEADER_BYTES
        self._head = 0  # monotonic byte position of the next write
        self._marked = 0  # _head at the last mark()
        # Below this position nothing is or will be read: the bytes skipped when the writer
        # went back to the ring's start with everything consumed (see put).
        self._floor = 0
        self.lock = threading.Lock()
        # Spill files written but maybe not yet read (the reader deletes them); whatever is
        # left when this side closes (the reader died) is deleted then.
        self._segments: list[str] = []

    def put(self, data: Any) -> tuple[Any, ...]:
        """Place a bytes-like object; returns its location for the control message."""
        view = memoryview(data)
        size = view.nbytes
        if size == 0:
            return ("e",)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        (tail,) = struct.unpack_from("<Q", self._map, 0)
        if tail == self._head and self._head % self._capacity:
            # The reader holds nothing: start again at the ring's first bytes, so that light
            # traffic keeps reusing the same few (resident, cached) pages instead of touching
            # the whole ring as it cycles.
            self._head += self._capacity - self._head % self._capacity
            self._floor = self._head
        position = self._head % self._capacity
        skip = self._capacity - position if position + size > self._capacity else 0
        free = self._capacity - (self._head - max(tail, self._floor))
        if skip + size + (-(skip + size) % _ALIGN) <= free:
            start = 0 if skip else position
            self._map[HEADER_BYTES + start : HEADER_BYTES + start + size] = view
            first = self._head + skip  # monotonic position of the tensor's first byte
            self._head += skip + size
            self._head += -self._head % _ALIGN
            return ("r", start, size, first)
        self._segments = [path for path in self._segments if os.path.exists(path)]
        path = self._write_segment(view)
        self._segments.append(path)
        return ("f", path, size)

    def mark(self) -> int | None:
        """The position the reader publishes once it has consumed everything put so far;
        None when nothing went into the ring since the last mark (the message carries its
        tensors inline, or has none), so the reader has nothing to publish."""
        if self._head == self._marked:
            return None
        self._marked = self._head
        return self._head

    @staticmethod
    def _write_segment(view: memoryview) -> str:
        path = os.path.join(_segment_dir(), f"{SEGMENT_PREFIX}{os.getpid()}-{next(_counter)}")
        with open(path, "wb") as file:
            file.write(view)
        return path

    def close(self) -> None:
        for path in self._segments:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._segments = []
        try:
            self._map.close()
        except BufferError:
            pass


def remove_segments_of(pid: int) -> None:
    """Delete spill files a dead process wrote and nobody read."""
    directory = _segment_dir()
    prefix = f"{SEGMENT_PREFIX}{pid}-"
    try:
        names = [name for name in os.listdir(directory) if name.startswith(prefix)]
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


class RingReader:
    """The reading side of one ring.

    Small tensors are copied out. Large ones (ZERO_COPY_BYTES and up) are handed out as numpy
    arrays viewing the ring itself: their bytes stay reserved until the last reference to
    the array (or a view of it) is gone, so what the reader publishes as consumed is the
    start of the oldest span still in use, else the last message's mark. A model or a
    frontend that keeps such an array simply keeps its span; the writer spills around it.
    """

    def __init__(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        self._map = mmap.mmap(fd, size)
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}  # span start -> live arrays viewing it
        # Finalizers only append here (they may run inside any code, even while this
        # thread holds the lock, when garbage collection strikes); the owner of the lock
        # applies them.
        self._released: collections.deque[int] = collections.deque()
        self._latest = 0
        self._closed = False

    def view(self, location: tuple[Any, ...]) -> memoryview | bytes:
        """The bytes at `location`; valid until `consumed` passes them."""
        kind = location[0]
        if kind == "e":
            return b""
        if kind == "r":
            start, size = location[1], location[2]
            return memoryview(self._map)[HEADER_BYTES + start : HEADER_BYTES + start + size]
        path = location[1]
        try:
            with open(path, "rb") as file:
                return file.read()
        finally:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def array(self, location: tuple[Any, ...], dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """A numpy array of the tensor at `location`: a view into the ring for large ring
        tensors (reserved until the array is garbage), a private copy otherwise."""
        if location[0] == "r" and location[2] >= ZERO_COPY_BYTES:
            start, size, first = location[1], location[2], location[3]
            array = np.frombuffer(
                self._map, dtype=dtype, count=size // dtype.itemsize, offset=HEADER_BYTES + start
            ).reshape(shape)
            with self._lock:
                self._held[first] = self._held.get(first, 0) + 1
                self._publish()
            weakref.finalize(array, self._release, first)
            return array
        raw = self.view(location)
        array = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if isinstance(raw, memoryview):
            raw.release()
        return array

    def _release(self, first: int) -> None:
        self._released.append(first)
        if self._lock.acquire(blocking=False):
            try:
                self._publish()
            finally:
                self._lock.release()
        # Else the holder of the lock (or the next message) publishes it.

    def consumed(self, mark: int | None) -> None:
        if mark is not None:
            with self._lock:
                self._latest = mark
                self._publish()

    def _publish(self) -> None:
        """Apply releases and publish the consumed position; call with the lock held."""
        while self._released:
            first = self._released.popleft()
            count = self._held.get(first, 0) - 1
            if count > 0:
                self._held[first] = count
            else:
                self._held.pop(first, None)
        if self._closed:
            return
        tail = min(self._held) if self._held else self._latest
        try:
            struct.pack_into("<Q", self._map, 0, tail)
        except ValueError:  # the mapping is closed
            pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
        try:
            self._map.close()
        except BufferError:
            # Arrays still view the ring; the mapping goes when they do.
            pass
