"""Tensor data in JSON: nested or flat lists into numpy arrays of a declared shape and
datatype (checked: kind, range, count), and arrays back into flat JSON lists (orjson writes
numpy arrays natively). BYTES travel as UTF-8 strings; FP16 and BF16 as numbers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...datatypes import bf16_words, numpy_dtype
from ...errors import NaiadError, shown
from ...tensor import Tensor

__all__ = ["array_from_json", "json_from_tensor"]


def _element_count(shape: tuple[int, ...]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


def array_from_json(name: str, datatype: str, shape: tuple[int, ...], data: Any) -> np.ndarray:
    """Nested or flat JSON data as an array of `shape`."""
    count = _element_count(shape)
    if not isinstance(data, list):
        data = [data]
    if datatype == "BYTES":
        array = _bytes_from_json(name, data)
    else:
        array = _numbers_from_json(name, datatype, data)
    if array.size != count:
        raise NaiadError.invalid(
            f"input '{name}': shape {list(shape)} needs {count} elements, 'data' holds {array.size}"
        )
    return array.reshape(shape)


def _leaves(data: list[Any]) -> Iterator[Any]:
    """The non-list items of a nested list, in row-major order (without recursion, so a
    deeply nested body cannot exhaust the stack)."""
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            yield item
        else:
            stack.pop()


def _bytes_from_json(name: str, data: list[Any]) -> np.ndarray:
    flat: list[bytes] = []
    for item in _leaves(data):
        if not isinstance(item, str):
            raise NaiadError.invalid(f"input '{name}': BYTES data in JSON must be strings, got {shown(item)}")
        flat.append(item.encode("utf-8"))
    array = np.empty(len(flat), dtype=object)
    array[:] = flat
    return array


def _numbers_from_json(name: str, datatype: str, data: list[Any]) -> np.ndarray:
    try:
        parsed = np.array(data)
    except ValueError:
        raise NaiadError.invalid(
            f"input '{name}': 'data' is a ragged nested list; every row must have the same length"
        ) from None
    kind = parsed.dtype.kind
    if datatype == "BOOL":
        allowed = "b"
    elif datatype in ("FP16", "FP32", "FP64", "BF16"):
        allowed = "iuf"
    else:
        allowed = "iu"
    if parsed.size and kind not in allowed and not (kind in "fO" and "i" in allowed and "f" not in allowed):
        wanted = "true/false values" if datatype == "BOOL" else ("numbers" if "f" in allowed else "integers")
        raise NaiadError.invalid(f"input '{name}': {datatype} data must be {wanted}")
    if datatype == "BF16":
        return bf16_words(parsed.astype(np.float32))
    target = numpy_dtype(datatype)
    if target.kind in "iu" and kind in "fO" and parsed.size:
        # Integers past int64 (UINT64's upper half) make numpy fall back to float or object.
        _require_integers(name, datatype, data)
        try:
            return np.array(data, dtype=target)
        except (OverflowError, ValueError):
            raise NaiadError.invalid(f"input '{name}': a value is outside the range of {datatype}") from None
    if kind in "iu" and target.kind in "iu" and parsed.size:
        info = np.iinfo(target)
        low, high = parsed.min(), parsed.max()
        if low < info.min or high > info.max:
            raise NaiadError.invalid(
                f"input '{name}': value {low if low < info.min else high} is outside the range of {datatype}"
            )
    return parsed.astype(target, copy=False)


def _require_integers(name: str, datatype: str, data: list[Any]) -> None:
    for item in _leaves(data):
        if isinstance(item, bool) or not isinstance(item, int):
            raise NaiadError.invalid(f"input '{name}': {datatype} data must be integers, got {shown(item)}")


def json_from_tensor(tensor: Tensor) -> Any:
    """Flat JSON data for an output (orjson writes numpy arrays natively)."""
    data = tensor.data
    if tensor.datatype == "BYTES":
        try:
            return [item.decode("utf-8") if isinstance(item, bytes) else str(item) for item in data.reshape(-1)]
        except UnicodeDecodeError:
            raise NaiadError.invalid(
                f"output '{tensor.name}' holds bytes that are not UTF-8 text, which JSON cannot carry; "
                "request it with the 'binary_data' parameter"
            ) from None
    if tensor.datatype == "BF16":
        data = (data.astype(np.uint32) << 16).view(np.float32)
    return np.ascontiguousarray(data).reshape(-1)
