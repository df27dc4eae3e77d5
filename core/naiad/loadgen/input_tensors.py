"""`InputTensor`: one input of one request, as both encodings need it; `request_inputs`
makes them from `--input-data random|zero` or a perf_analyzer JSON data file.

Data are made once, before the step: every request of a step sends the same bytes (or
cycles through a data file's steps), as perf_analyzer does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..datatypes import numpy_dtype, serialize_bytes_tensor, tensor_to_raw
from .data_file import FileTensor, read_data_file
from .load_error import LoadError
from .model_info import ModelInfo

__all__ = ["InputTensor", "request_inputs"]

# Random data are the same on every run, so two runs send the same requests.
_SEED = 0


@dataclass(frozen=True, slots=True)
class InputTensor:
    name: str
    datatype: str
    # With the batch dimension when the model batches.
    shape: tuple[int, ...]
    array: np.ndarray

    def raw(self) -> bytes:
        """The binary-tensor form: little-endian elements, BYTES as length-prefixed items."""
        if self.datatype == "BYTES":
            return serialize_bytes_tensor(self.array)
        return bytes(tensor_to_raw(self.datatype, self.array))

    def json_data(self) -> list[Any]:
        """The JSON form: a flat list (BYTES as text, BF16 as numbers)."""
        flat = self.array.ravel()
        if self.datatype == "BYTES":
            return [item.decode(errors="replace") if isinstance(item, bytes) else str(item) for item in flat]
        if self.datatype == "BF16":
            values: list[Any] = (flat.astype(np.uint32) << 16).view(np.float32).tolist()
            return values
        values = flat.tolist()
        return values


def request_inputs(
    model: ModelInfo, dims: Mapping[str, tuple[int, ...]], input_data: str, batch_size: int, string_length: int
) -> list[list[InputTensor]]:
    """One list of input tensors per data step (one step unless a data file has several)."""
    if input_data in ("random", "zero"):
        rng = np.random.default_rng(_SEED)
        one = {
            t.name: _generated(t.datatype, dims[t.name], input_data == "zero", rng, string_length) for t in model.inputs
        }
        return [_batched(model, one, batch_size)]
    steps = read_data_file(input_data)
    known = {t.name: t for t in model.inputs}
    tensors = []
    for index, step in enumerate(steps):
        arrays = {}
        for tensor in model.inputs:
            if tensor.name not in step:
                raise LoadError(f"--input-data {input_data}: step {index} has no data for input '{tensor.name}'")
            arrays[tensor.name] = _from_file(input_data, index, step[tensor.name], tensor.datatype, dims[tensor.name])
        for name in step:
            if name not in known:
                raise LoadError(f"--input-data {input_data}: model '{model.name}' has no input '{name}'")
        tensors.append(_batched(model, arrays, batch_size))
    return tensors


def _generated(datatype: str, dims: tuple[int, ...], zero: bool, rng: np.random.Generator, length: int) -> np.ndarray:
    count = int(np.prod(dims, dtype=np.int64))
    if datatype == "BYTES":
        text = b"0" * length if zero else None
        items = [text if text is not None else rng.integers(97, 123, length, np.uint8).tobytes() for _ in range(count)]
        return np.array(items, dtype=object).reshape(dims)
    dtype = numpy_dtype(datatype)
    if zero:
        return np.zeros(dims, dtype)
    if datatype == "BOOL":
        return rng.integers(0, 2, dims).astype(np.bool_)
    if datatype == "BF16":
        return (rng.random(dims, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if dtype.kind == "f":
        return rng.random(dims).astype(dtype)
    # Small integers: an index or a token id input stays valid.
    return rng.integers(0, 100, dims).astype(dtype)


def _from_file(path: str, index: int, value: FileTensor, datatype: str, dims: tuple[int, ...]) -> np.ndarray:
    shape = value.shape if value.shape is not None else dims
    if value.raw is not None:
        if datatype == "BYTES":
            return np.array([value.raw], dtype=object).reshape(shape)
        array = np.frombuffer(value.raw, numpy_dtype(datatype))
    elif datatype == "BYTES":
        array = np.array([str(v).encode() for v in value.content], dtype=object)
    else:
        try:
            array = np.asarray(value.content, dtype=numpy_dtype(datatype) if datatype != "BF16" else np.float32)
        except (TypeError, ValueError, OverflowError):
            raise LoadError(f"--input-data {path}: step {index}: values that are not {datatype}") from None
        if datatype == "BF16":
            array = (array.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if array.size != int(np.prod(shape, dtype=np.int64)):
        raise LoadError(
            f"--input-data {path}: step {index}: {array.size} values do not fill shape {list(shape)} "
            '(give the shape with "shape" or --shape)'
        )
    return array.reshape(shape)


def _batched(model: ModelInfo, arrays: Mapping[str, np.ndarray], batch_size: int) -> list[InputTensor]:
    """A batch of `batch_size` copies of each tensor (no batch dimension for a model
    without batching)."""
    tensors = []
    for tensor in model.inputs:
        array = arrays[tensor.name]
        if model.max_batch_size > 0:
            array = np.repeat(array[np.newaxis], batch_size, axis=0)
        tensors.append(InputTensor(tensor.name, tensor.datatype, tuple(array.shape), array))
    return tensors
