"""Inputs a client placed in CUDA shared memory on the instance's own GPU, read there: each
request's bytes are viewed in the client's region (`__cuda_array_interface__`, no copy) and
gathered into the batch by one copy on the GPU, instead of crossing to the host and back. The
views are kept from batch to batch (`DeviceViews`): a client reuses its regions.

Every request of the batch must have the input on this GPU (a batch is one tensor); otherwise
the input is stacked on the host as before, from the copy decoding made. The regions are held
(`CudaPlacement.borrowed`) until the instance has read its outputs, after which no kernel of
the batch reads them: unregistering a region waits for that.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import numpy as np
import torch

from naiad.backend import InferenceRequest, Tensor

from .device_views import DeviceViews

__all__ = ["placed_inputs", "gather"]

# numpy dtypes whose tensors torch gathers on a GPU; BF16 travels as int16 words of the same size.
_GATHERED = {np.dtype(t) for t in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")}
_WORDS = {"BF16": np.dtype("int16")}


def _dtype(tensor: Tensor) -> np.dtype | None:
    dtype = _WORDS.get(tensor.datatype, tensor.data.dtype)
    return dtype if dtype in _GATHERED else None


def placed_inputs(
    requests: list[InferenceRequest], names: list[str], device: torch.device, held: ExitStack
) -> dict[str, list[tuple[int, Tensor]]]:
    """For each of `names` that every request placed on `device`: (device address, tensor) per
    request, its region held by `held`. Names left out are stacked on the host."""
    found: dict[str, list[tuple[int, Tensor]]] = {}
    for name in names:
        tensors = [request.input(name) for request in requests]
        placed = [
            (t.placement, t)
            for t in tensors
            if t is not None
            and t.placement is not None
            and t.placement.device_id == device.index
            and t.placement.byte_size == t.data.nbytes
            and _dtype(t) is not None
        ]
        if len(placed) < len(requests):
            continue
        pointers = [held.enter_context(placement.borrowed()) for placement, _ in placed]
        if all(pointer is not None for pointer in pointers):
            found[name] = [(pointer, t) for pointer, (_, t) in zip(pointers, placed) if pointer is not None]
    return found


def gather(items: list[tuple[int, Tensor]], views: DeviceViews) -> Any:
    """The batch of one input, on the views' device: the requests' bytes copied out of their
    regions (a copy even for one request, so that forward never writes into a client's memory)."""
    parts = []
    for pointer, tensor in items:
        dtype = _dtype(tensor)
        assert dtype is not None  # placed_inputs checked it
        parts.append(views.tensor(pointer, tuple(tensor.data.shape), dtype))
    batch = torch.cat(parts) if len(parts) > 1 else parts[0].clone()
    return batch.view(torch.bfloat16) if items[0][1].datatype == "BF16" else batch
