"""torch dtypes and Triton datatypes, and numpy <-> torch conversion (BF16 as uint16 words)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["DTYPE_TO_DATATYPE", "datatype_of_dtype", "to_torch", "to_numpy"]

DTYPE_TO_DATATYPE: dict[torch.dtype, str] = {
    torch.bool: "BOOL",
    torch.uint8: "UINT8",
    torch.uint16: "UINT16",
    torch.uint32: "UINT32",
    torch.uint64: "UINT64",
    torch.int8: "INT8",
    torch.int16: "INT16",
    torch.int32: "INT32",
    torch.int64: "INT64",
    torch.float16: "FP16",
    torch.float32: "FP32",
    torch.float64: "FP64",
    torch.bfloat16: "BF16",
}


def datatype_of_dtype(dtype: torch.dtype) -> str | None:
    return DTYPE_TO_DATATYPE.get(dtype)


def to_torch(array: np.ndarray, datatype: str, device: torch.device) -> torch.Tensor:
    """A tensor on `device` holding `array` (no copy on CPU when the array is writable)."""
    if not array.flags.writeable or not array.flags.c_contiguous:
        # torch.from_numpy warns on read-only buffers (wire data is viewed, not copied).
        array = np.ascontiguousarray(array).copy()
    tensor = torch.from_numpy(array)
    if datatype == "BF16":
        tensor = tensor.view(torch.bfloat16)
    if device.type != "cpu":
        tensor = tensor.to(device, non_blocking=True)
    return tensor


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.uint16)
    return tensor.contiguous().numpy()
