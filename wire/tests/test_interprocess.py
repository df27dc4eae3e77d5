"""naiad_wire.interprocess: tensors through a shared-memory ring, in order, with the reader's
consumed position freeing space, spills when the ring is full, and light traffic kept to the
ring's first pages."""

from __future__ import annotations

import gc
import os
import struct

import numpy as np
import pytest

from naiad_wire.interprocess.messages import (
    INLINE_BYTES,
    FrameReader,
    decode_array,
    encode_array,
    pack_frame,
    pack_placing,
    unpack_message,
)
from naiad_wire.interprocess.shm_ring import ZERO_COPY_BYTES, RingReader, RingWriter, create_ring_fd


@pytest.fixture
def ring() -> tuple[RingWriter, RingReader]:
    fd = create_ring_fd(1 << 20)
    try:
        yield RingWriter(fd), RingReader(fd)
    finally:
        os.close(fd)


_DATATYPES = {"float32": "FP32", "float64": "FP64", "int32": "INT32"}


def _send(writer: RingWriter, reader: RingReader, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """One message through the ring and back out, as the two processes would pass it."""
    frame = pack_placing(
        lambda ring: {
            "tensors": [encode_array(ring, f"t{i}", _DATATYPES[a.dtype.name], a) for i, a in enumerate(arrays)]
        },
        writer,
    )
    (body,) = FrameReader().feed(frame)
    message = unpack_message(body)
    out = [decode_array(reader, d)[2] for d in message["tensors"]]
    reader.consumed(message.get("mark"))
    return out


def _tail(writer: RingWriter) -> int:
    return struct.unpack_from("<Q", writer._map, 0)[0]


def test_tensors_of_every_size_arrive_equal(ring: tuple[RingWriter, RingReader]) -> None:
    writer, reader = ring
    sizes = [0, 3, INLINE_BYTES // 4 - 1, INLINE_BYTES, ZERO_COPY_BYTES // 4 + 5, 200_000]
    arrays = [np.arange(n, dtype=np.float32) for n in sizes]
    for received, sent in zip(_send(writer, reader, arrays), arrays):
        assert np.array_equal(received, sent)


def test_a_small_tensor_arrives_as_the_readers_own_writable_array(ring: tuple[RingWriter, RingReader]) -> None:
    writer, reader = ring
    writable = np.arange(12, dtype=np.int32).reshape(3, 4)
    read_only = np.arange(6, dtype=np.float64).reshape(2, 3)
    read_only.flags.writeable = False  # pickles as bytes, not a bytearray
    scalar = np.array(2.5, dtype=np.float32)
    for received, sent in zip(_send(writer, reader, [writable, read_only, scalar]), [writable, read_only, scalar]):
        assert received.shape == sent.shape and received.dtype == sent.dtype
        assert np.array_equal(received, sent)
        assert received.flags.writeable
        received[...] = 0  # the reader's own: the sender's array is untouched
    assert writable[2, 3] == 11 and read_only[1, 2] == 5.0


def test_a_tensor_whose_bytes_do_not_fit_its_shape_is_refused() -> None:
    with pytest.raises(ValueError, match=r"tensor 't': 8 bytes for FP32 of shape \[3\]"):
        decode_array(None, ("t", "FP32", (3,), ("i", bytearray(8))))  # type: ignore[arg-type]


def test_a_large_tensor_keeps_its_span_until_it_is_freed(ring: tuple[RingWriter, RingReader]) -> None:
    writer, reader = ring
    (held,) = _send(writer, reader, [np.ones(ZERO_COPY_BYTES, np.float32)])
    # Viewed in place: the reader publishes the start of the span it still holds.
    assert _tail(writer) == 0 and writer._head > 0
    del held
    gc.collect()
    reader.consumed(None)
    assert _tail(writer) == writer._head


def test_a_tensor_larger_than_the_free_space_spills_and_is_deleted_once_read(
    ring: tuple[RingWriter, RingReader],
) -> None:
    writer, reader = ring
    big = np.arange(400_000, dtype=np.float32)  # 1.6 MB: more than the 1 MiB ring
    location = writer.put(big)
    assert location[0] == "f" and os.path.exists(location[1])
    data = reader.view(location)
    assert np.array_equal(np.frombuffer(data, np.float32), big)
    assert not os.path.exists(location[1])


def test_light_traffic_keeps_to_the_first_pages(ring: tuple[RingWriter, RingReader]) -> None:
    """Each message consumed before the next is written: every one starts at the ring's start,
    where a ring that only cycled would have walked through all of it."""
    writer, reader = ring
    array = np.ones(INLINE_BYTES, np.float32)  # 32 KiB: through the ring, copied out
    starts = set()
    for _ in range(100):
        location = encode_array(writer, "x", "FP32", array)[3]
        mark = writer.mark()
        starts.add(location[1])
        reader.array(location, np.dtype(np.float32), array.shape)
        reader.consumed(mark)
    assert starts == {0}


def test_after_going_back_to_the_start_the_whole_ring_is_free(ring: tuple[RingWriter, RingReader]) -> None:
    writer, reader = ring
    _send(writer, reader, [np.ones(INLINE_BYTES, np.float32)])
    # Nearly the whole ring in one tensor, right after a small one was consumed: it fits in
    # the ring (it would spill if the skipped bytes still counted as taken).
    nearly_all = np.ones((writer._capacity - 4096) // 4, np.float32)
    location = encode_array(writer, "x", "FP32", nearly_all)[3]
    assert location[0] == "r" and location[1] == 0


def test_frames_arrive_whole_whatever_the_chunks() -> None:
    frames = b"".join(pack_frame({"n": n, "data": b"x" * n}) for n in range(50))
    reader = FrameReader()
    bodies = []
    for i in range(0, len(frames), 7):
        bodies += reader.feed(frames[i : i + 7])
    assert [unpack_message(b)["n"] for b in bodies] == list(range(50))
