"""TensorRT data types and Triton datatypes, by TensorRT's enum names (`DataType.FLOAT`
has `.name == "FLOAT"`), so the mapping is checked without TensorRT installed."""

from __future__ import annotations

import numpy as np

from naiad.backend.helpers import numpy_dtype

__all__ = ["datatype_of_trt", "numpy_dtype_of"]

_TRT_TO_DATATYPE: dict[str, str] = {
    "FLOAT": "FP32",
    "HALF": "FP16",
    "BF16": "BF16",
    "INT8": "INT8",
    "INT32": "INT32",
    "INT64": "INT64",
    "BOOL": "BOOL",
    "UINT8": "UINT8",
}


def datatype_of_trt(trt_name: str) -> str | None:
    """`FLOAT` -> `FP32`; None for types a client cannot send or read (FP8, INT4, FP4)."""
    return _TRT_TO_DATATYPE.get(trt_name.rpartition(".")[2])


def numpy_dtype_of(datatype: str) -> np.dtype:
    """The host array dtype for a tensor of `datatype` (BF16 as uint16 words, which is
    also TensorRT's memory layout for bf16)."""
    return numpy_dtype(datatype)
