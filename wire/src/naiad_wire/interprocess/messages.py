"""The framed messages between two processes of one server, their tensors in shared-memory
rings (a front door and the model home; the model home and a Python model's process).

A message is a 4-byte little-endian length and a pickle of plain values (str, int, float,
bool, None, bytes, bytearray, lists, tuples, dicts; a dict or a tuple at the top); the unpickler refuses anything
that would import code, so a message can never run code on the reader's side. A tensor
travels as ``(name, datatype, shape, location)``. A small one carries its bytes in the
message itself (``("i", bytes)``): for a few hundred bytes, a ring's bookkeeping on both
sides costs more than the copy. A larger one has its bytes in a shared-memory ring (see
shm_ring.py).

It needs only numpy and the standard library: a Python model's process imports it in
whatever environment the model runs in.
"""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .bytes_elements import decode_bytes_elements, encode_bytes_elements
from .shm_ring import RingReader, RingWriter

__all__ = [
    "FRAME_HEADER",
    "NUMPY_OF_DATATYPE",
    "FrameReader",
    "pack_frame",
    "pack_placing",
    "unpack_message",
    "encode_array",
    "decode_array",
    "plain_parameters",
]

FRAME_HEADER = struct.Struct("<I")
# Tensors smaller than this travel inside the control message, larger ones in the ring.
INLINE_BYTES = 8 * 1024

# The numpy dtype of each fixed-size KServe datatype (BYTES travels as length-prefixed elements).
NUMPY_OF_DATATYPE: dict[str, Any] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BF16": np.uint16,
}
# Their dtype objects, made once: np.dtype() for each tensor cost a sixth of its decoding.
_DTYPES = {datatype: np.dtype(kind) for datatype, kind in NUMPY_OF_DATATYPE.items()}


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"control messages carry plain values only, not {module}.{name}")


def pack_frame(message: object) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME_HEADER.pack(len(body)) + body


def pack_placing(build: Callable[[RingWriter], dict[str, Any]], ring: RingWriter) -> bytes:
    """The frame of the message `build` makes while placing its tensors in `ring`, with the
    ring's mark when it used the ring (the reader publishes the mark once it has consumed
    them). The frame must be sent before anything else is placed in `ring`."""
    message = build(ring)
    mark = ring.mark()
    if mark is not None:
        message["mark"] = mark
    return pack_frame(message)


def unpack_message(body: bytes) -> Any:
    """The plain values of a frame's body: whatever the writer packed (a dict, or a tuple
    whose first item names its kind, as the Python backend's stub messages are)."""
    return _PlainUnpickler(io.BytesIO(body)).load()


class FrameReader:
    """Cuts a byte stream into message bodies, whatever the chunks it arrives in: both sides
    read their socket in whatever pieces it gives and decode each complete frame at once."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        if not buffer and len(data) >= 4:
            # The common case: whole frames in one chunk, nothing left over from before.
            (length,) = FRAME_HEADER.unpack_from(data, 0)
            if len(data) == 4 + length:
                return [data[4:]]
        buffer += data
        bodies: list[bytes] = []
        start, end = 0, len(buffer)
        while end - start >= 4:
            (length,) = FRAME_HEADER.unpack_from(buffer, start)
            if end - start - 4 < length:
                break
            bodies.append(bytes(buffer[start + 4 : start + 4 + length]))
            start += 4 + length
        del buffer[:start]
        return bodies


def encode_array(ring: RingWriter, name: str, datatype: str, array: np.ndarray) -> tuple[Any, ...]:
    """A tensor's descriptor, its bytes inline or copied into the ring. Call under
    `ring.lock`."""
    if datatype == "BYTES":
        data: Any = encode_bytes_elements(array) if array.size else b""
        size = len(data)
    else:
        # A C-contiguous array is placed straight from its buffer (the common case: no copy
        # on this side, no intermediate array objects).
        data = array if array.flags.c_contiguous else np.ascontiguousarray(array)
        size = data.nbytes
    if size < INLINE_BYTES:
        # Pickled in-band, a PickleBuffer is one copy of the array's bytes.
        return (name, datatype, array.shape, ("i", pickle.PickleBuffer(data) if size else b""))
    return (name, datatype, array.shape, ring.put(data))


def decode_array(ring: RingReader, descriptor: tuple[Any, ...]) -> tuple[str, str, np.ndarray]:
    """A tensor out of its message or the ring: small tensors are the reader's own (and
    writable), large ones view the ring in place (see RingReader.array)."""
    name, datatype, shape, location = descriptor
    count = 1
    for dim in shape:
        count *= dim
    inline = location[0] == "i"
    if datatype == "BYTES":
        raw = location[1] if inline else ring.view(location)
        array = _decode_bytes(raw, count).reshape(shape)
        if isinstance(raw, memoryview):
            raw.release()
        return name, datatype, array
    dtype = _DTYPES[datatype]
    size = len(location[1]) if inline else location[2] if location[0] != "e" else 0
    if size != count * dtype.itemsize:
        raise ValueError(f"tensor '{name}': {size} bytes for {datatype} of shape {list(shape)}")
    if inline:
        # The reader's array is writable and its own, over a bytearray: a writable array
        # pickles in-band as one, and a read-only one (an HTTP body's tensor) as bytes,
        # copied here. One constructor call: under half the cost of frombuffer, reshape
        # and copy.
        data = location[1]
        return name, datatype, np.ndarray(shape, dtype, data if type(data) is bytearray else bytearray(data))
    if size == 0:
        return name, datatype, np.empty(shape, dtype=dtype)
    return name, datatype, ring.array(location, dtype, tuple(shape))


def _decode_bytes(raw: Any, count: int) -> np.ndarray:
    items = decode_bytes_elements(raw)
    if len(items) != count:
        raise ValueError(f"BYTES tensor holds {len(items)} elements, its shape needs {count}")
    return items


def plain_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """Request/response parameters as plain values (numpy scalars become Python ones)."""
    if not parameters:
        return {}
    plain: dict[str, Any] = {}
    for key, value in parameters.items():
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (str, int, float, bool)) and value is not None:
            value = str(value)
        plain[str(key)] = value
    return plain
