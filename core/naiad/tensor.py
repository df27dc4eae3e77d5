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
    shared memory, says where the same bytes sit on the GPU (device_placement.py).
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray
    parameters: dict[str, Any] = field(default_factory=dict)
    placement: CudaPlacement | None = None

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

    def as_numpy(self) -> np.ndarray:
        return self.data

    @property
    def element_count(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count
