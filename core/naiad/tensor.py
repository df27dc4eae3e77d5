"""`Tensor`: a named, typed, shaped numpy array; the unit every layer passes around."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .datatypes import DATATYPES, datatype_of, numpy_dtype
from .device_placement import CudaPlacement

__all__ = ["Tensor"]


@dataclass(slots=True)
class Tensor:
    """One input or output tensor.

    `data` is a numpy array of `shape`: the dtype of `datatype` (BF16 as uint16 words,
    BYTES as an object array of `bytes`). `placement`, on an input a client placed in CUDA
    shared memory, says where the same bytes sit on the GPU (device_placement.py). An output a
    backend wrote on the GPU itself (`written_on_device`) has its `placement` and is not
    `on_host`: its `data` is a stand-in that holds none of its bytes.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray
    parameters: dict[str, Any] = field(default_factory=dict)
    placement: CudaPlacement | None = None
    # False only for `written_on_device`: the bytes are at `placement` alone.
    on_host: bool = True

    @classmethod
    def from_numpy(cls, name: str, array: np.ndarray, datatype: str | None = None) -> Tensor:
        """Wrap an array; the datatype is inferred unless given (needed for BF16)."""
        array = np.asarray(array)
        dt = datatype or datatype_of(array)
        if dt not in DATATYPES:
            raise ValueError(f"unknown datatype {dt!r} for tensor {name!r}")
        if dt == "BYTES" and array.dtype != object:
            array = array.astype(object)
        elif dt != "BYTES" and array.dtype != numpy_dtype(dt):
            array = array.astype(numpy_dtype(dt))
        return cls(name, dt, array.shape, array)

    @classmethod
    def written_on_device(cls, name: str, datatype: str, shape: tuple[int, ...], placement: CudaPlacement) -> Tensor:
        """An output a backend wrote on the GPU straight into the client's CUDA shared-memory
        region, at `placement` (its `RequestedOutput.placement`): the server copies nothing
        there, and `data` is a read-only stand-in of the shape that holds no bytes (zeros)."""
        stand_in = np.broadcast_to(np.zeros((), numpy_dtype(datatype)), shape)
        return cls(name, datatype, tuple(shape), stand_in, placement=placement, on_host=False)

    def as_numpy(self) -> np.ndarray:
        return self.data

    @property
    def element_count(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count
