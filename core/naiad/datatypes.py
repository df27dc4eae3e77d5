"""Triton's tensor datatypes: names, numpy equivalents, config enum names, byte encoding.

BYTES tensors travel as numpy object arrays of `bytes`; on the wire each element is a
4-byte little-endian length followed by its bytes. BF16 has no numpy dtype: it is carried as
raw uint16 words (the upper half of an IEEE float32), which keeps it loss-free end to end.
"""

from __future__ import annotations

import struct

import numpy as np

from .errors import NaiadError

__all__ = [
    "DATATYPES",
    "numpy_dtype",
    "datatype_of",
    "element_size",
    "config_type_to_datatype",
    "datatype_to_config_type",
    "serialize_bytes_tensor",
    "deserialize_bytes_tensor",
    "tensor_from_raw",
    "tensor_to_raw",
    "ByteSizeMismatch",
    "input_from_raw",
    "MAX_DIMS",
]

# The most dimensions a tensor may have: numpy 1.x arrays hold at most 32 (numpy 2, 64), and
# a request's shape becomes a numpy array's before the model's dims are compared with it.
MAX_DIMS = 32

_NUMPY: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": np.dtype(np.uint16),
    "BYTES": np.dtype(object),
}

DATATYPES: frozenset[str] = frozenset(_NUMPY)

_FROM_NUMPY: dict[np.dtype, str] = {dt: name for name, dt in _NUMPY.items() if name != "BF16"}


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype that holds a tensor of `datatype` (BF16 as uint16 words)."""
    return _NUMPY[datatype]


def datatype_of(array: np.ndarray) -> str:
    """The Triton datatype name for a numpy array; str/bytes/object arrays are BYTES."""
    found = _FROM_NUMPY.get(array.dtype)  # the usual case: a native-order dtype
    if found is not None:
        return found
    kind = array.dtype.kind
    if kind in ("O", "S", "U"):
        return "BYTES"
    try:
        return _FROM_NUMPY[array.dtype.newbyteorder("=")]
    except KeyError:
        raise ValueError(f"numpy dtype {array.dtype} has no Triton datatype") from None


def element_size(datatype: str) -> int:
    """Bytes per element for fixed-size datatypes; 0 for BYTES."""
    return 0 if datatype == "BYTES" else _NUMPY[datatype].itemsize


def config_type_to_datatype(type_name: str) -> str:
    """`TYPE_FP32` -> `FP32`; Triton's config calls BYTES `TYPE_STRING`."""
    name = type_name.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name


def datatype_to_config_type(datatype: str) -> str:
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


def _as_bytes(item: object) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, (bytearray, memoryview, np.bytes_)):
        return bytes(item)
    return str(item).encode("utf-8")


def serialize_bytes_tensor(array: np.ndarray) -> bytes:
    """Length-prefixed encoding of every element, in C order."""
    parts: list[bytes] = []
    for item in array.reshape(-1):
        data = _as_bytes(item)
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    return b"".join(parts)


def deserialize_bytes_tensor(buffer: bytes | memoryview, count: int | None = None) -> np.ndarray:
    """Decode length-prefixed elements into a flat object array.

    `count`, when given, is the number of elements the shape promises; a buffer holding
    a different number, or ending inside an element, raises ValueError.
    """
    view = memoryview(buffer)
    items: list[bytes] = []
    offset, end = 0, len(view)
    while offset < end:
        if offset + 4 > end:
            raise ValueError("BYTES data ends inside an element's length prefix")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > end:
            raise ValueError("BYTES data ends inside an element")
        items.append(bytes(view[offset : offset + length]))
        offset += length
    if count is not None and len(items) != count:
        raise ValueError(f"BYTES data holds {len(items)} elements, the shape needs {count}")
    result = np.empty(len(items), dtype=object)
    result[:] = items
    return result


class ByteSizeMismatch(ValueError):
    """Raw data of a fixed-size datatype whose length is not what the shape needs."""

    def __init__(self, datatype: str, shape: tuple[int, ...], expected: int, got: int) -> None:
        super().__init__(f"{got} bytes given, {datatype} of shape {list(shape)} needs {expected}")
        self.expected = expected
        self.got = got


def tensor_from_raw(datatype: str, shape: tuple[int, ...], raw: bytes | memoryview) -> np.ndarray:
    """View raw little-endian bytes as an array of `shape` (no copy for fixed-size types).

    Raises ValueError (ByteSizeMismatch for a fixed-size datatype) when the bytes do not
    match the shape.
    """
    count = 1
    for dim in shape:
        count *= dim
    if datatype == "BYTES":
        return deserialize_bytes_tensor(raw, count).reshape(shape)
    dtype = _NUMPY[datatype]
    expected = count * dtype.itemsize
    if len(raw) != expected:
        raise ByteSizeMismatch(datatype, shape, expected, len(raw))
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def input_from_raw(name: str, model: str, datatype: str, shape: tuple[int, ...], raw: bytes | memoryview) -> np.ndarray:
    """`tensor_from_raw` for input `name` of a request to `model`: data that does not fit
    the shape is INVALID_ARG in Triton's words (which clients match on), naiad's detail after."""
    try:
        return tensor_from_raw(datatype, shape, raw)
    except ByteSizeMismatch as exc:
        raise NaiadError.invalid(
            f"input byte size mismatch for input '{name}' for model '{model}'. Expected {exc.expected}, "
            f"got {exc.got} ({datatype} of shape {list(shape)})"
        ) from None
    except ValueError as error:  # not `exc` again: mypyc gives a name one type in a function
        raise NaiadError.invalid(f"input '{name}' for model '{model}': {error}") from None


def tensor_to_raw(datatype: str, array: np.ndarray) -> bytes | memoryview:
    """Raw wire bytes of an array (a zero-copy view when it is already contiguous)."""
    if datatype == "BYTES":
        return serialize_bytes_tensor(array)
    if datatype == "BF16" and array.dtype != np.uint16:
        array = bf16_words(array)
    if array.size == 0:
        return b""  # memoryview cannot cast a view with a zero in its shape
    contiguous = np.ascontiguousarray(array)
    return contiguous.data.cast("B")


def bf16_words(array: np.ndarray) -> np.ndarray:
    """Float values as BF16 words (truncating the low half of float32)."""
    as_f32 = np.ascontiguousarray(array, dtype=np.float32)
    return (as_f32.view(np.uint32) >> 16).astype(np.uint16)
