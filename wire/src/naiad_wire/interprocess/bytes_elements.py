"""The serialized form of a BYTES tensor, on the wire between the processes and in
pb_utils' `serialize_byte_tensor`: each element as a 4-byte little-endian length and its
bytes, in C order (the KServe binary form of BYTES)."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

__all__ = ["encode_bytes_elements", "decode_bytes_elements"]

_LENGTH = struct.Struct("<I")


def encode_bytes_elements(array: np.ndarray) -> bytes:
    """Every element of an object/bytes/str array; str is UTF-8, anything else its str()."""
    parts: list[bytes] = []
    for item in array.reshape(-1):
        if isinstance(item, bytes):
            data = item
        elif isinstance(item, str):
            data = item.encode("utf-8")
        elif isinstance(item, (bytearray, memoryview, np.bytes_)):
            data = bytes(item)
        else:
            data = str(item).encode("utf-8")
        parts.append(_LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def decode_bytes_elements(encoded: Any) -> np.ndarray:
    """A flat object array of `bytes`; ValueError when the data ends inside an element."""
    view = memoryview(encoded).cast("B")
    items: list[bytes] = []
    offset, end = 0, len(view)
    try:
        while offset < end:
            if offset + 4 > end:
                raise ValueError("ends inside an element's length")
            (length,) = _LENGTH.unpack_from(view, offset)
            offset += 4
            if offset + length > end:
                raise ValueError("ends inside an element")
            items.append(bytes(view[offset : offset + length]))
            offset += length
    finally:
        view.release()
    result = np.empty(len(items), dtype=object)
    result[:] = items
    return result
