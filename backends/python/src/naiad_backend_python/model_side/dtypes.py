"""Triton's datatypes in the model API: the TRITONSERVER_DataType numbers, datatype names and
numpy dtypes, and the serialized form of BYTES tensors."""

from __future__ import annotations

from typing import Any

import numpy as np

from naiad_wire.interprocess.bytes_elements import decode_bytes_elements, encode_bytes_elements
from naiad_wire.interprocess.messages import NUMPY_OF_DATATYPE

from .errors import TritonModelException

__all__ = [
    "TRITON_STRING_TO_NUMPY",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "numpy_to_triton_type",
    "datatype_of_dtype",
    "type_number",
    "serialize_byte_tensor",
    "deserialize_bytes_tensor",
]

# TRITONSERVER_DataType numbers <-> datatype names <-> numpy dtypes. BF16 has no numpy
# dtype; its tensors hold the raw uint16 words.
_TYPE_NUMBERS: dict[str, int] = {
    "BOOL": 1,
    "UINT8": 2,
    "UINT16": 3,
    "UINT32": 4,
    "UINT64": 5,
    "INT8": 6,
    "INT16": 7,
    "INT32": 8,
    "INT64": 9,
    "FP16": 10,
    "FP32": 11,
    "FP64": 12,
    "BYTES": 13,
    "BF16": 14,
}
_NUMBER_TO_TYPE = {number: name for name, number in _TYPE_NUMBERS.items()}
_NUMPY_OF_TYPE: dict[str, Any] = {**NUMPY_OF_DATATYPE, "BYTES": np.object_}
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    ("TYPE_STRING" if name == "BYTES" else f"TYPE_{name}"): dtype
    for name, dtype in _NUMPY_OF_TYPE.items()
    if name != "BF16"
}


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """`"TYPE_FP32"` -> `numpy.float32` (`TYPE_STRING` -> `numpy.object_`)."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int) -> Any:
    """A TRITONSERVER_DataType number -> numpy type (13, BYTES -> `numpy.object_`)."""
    name = _NUMBER_TO_TYPE.get(data_type)
    return None if name is None else _NUMPY_OF_TYPE[name]


def numpy_to_triton_type(data_type: Any) -> int | None:
    """A numpy type or dtype -> TRITONSERVER_DataType number; None when it has none."""
    name = datatype_of_dtype(np.dtype(data_type)) if data_type is not None else None
    return None if name is None else _TYPE_NUMBERS[name]


# numpy dtype -> Triton datatype, for every numeric type (BF16 travels as uint16 words, so
# uint16 arrays are UINT16 here). A dict lookup: models build several tensors per request.
_DATATYPE_OF_DTYPE: dict[np.dtype, str] = {
    np.dtype(numpy_type): name for name, numpy_type in _NUMPY_OF_TYPE.items() if name not in ("BYTES", "BF16")
}


def datatype_of_dtype(dtype: np.dtype) -> str | None:
    """The Triton datatype name of a numpy dtype (strings and objects are BYTES); None if none."""
    if dtype.kind in ("O", "S", "U"):
        return "BYTES"
    return _DATATYPE_OF_DTYPE.get(dtype)


def type_number(datatype: str) -> int:
    """A datatype name -> its TRITONSERVER_DataType number ("FP32" -> 11)."""
    return _TYPE_NUMBERS[datatype]


def serialize_byte_tensor(input_tensor: np.ndarray) -> bytes | tuple[()] | None:
    """Each element as a 4-byte little-endian length and its bytes, in C order, as one
    `bytes` object. Like Triton's: `()` for an empty tensor, None for a non-bytes one."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype.kind not in ("O", "S", "U"):
        return None
    return encode_bytes_elements(input_tensor)


def deserialize_bytes_tensor(encoded_tensor: bytes | memoryview | np.ndarray) -> np.ndarray:
    """The inverse of `serialize_byte_tensor`: a flat object array of `bytes`."""
    try:
        return decode_bytes_elements(encoded_tensor)
    except ValueError as exc:
        raise TritonModelException(f"serialized BYTES data {exc}") from None
