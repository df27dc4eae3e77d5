"""Outputs a client placed in CUDA shared memory on the instance's own GPU, written there: each
request's rows are copied on the GPU from the model's output into the client's region, and its
response carries no bytes for them (`Tensor.written_on_device`), instead of the output crossing
to the host and the request's process copying it back to the GPU.

A batch's copies are one torch call (`copy_rows`: four calls in all, with the views it takes),
whatever the number of requests: every torch call gives the interpreter lock away and must take
it back, which beside the model home's busy event loop can wait a switch interval. Written a request at a time (three calls each), 12
requests' outputs of 4,000 bytes were copied 24-68 times a second beside a thread running
Python, on a CPU; by `copy_rows`, 70-151 (`backends/pytorch/bench/handoffs_beside_a_loop.py`).

A request's output goes through the host as before where it placed it elsewhere (system shared
memory, another GPU, a region too small for it: that error is then the usual one), or where the
output is not a tensor on this GPU (BYTES). The regions are held (`CudaPlacement.borrowed`)
until the instance's stream has finished the copies: unregistering a region waits for that.
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from typing import Any

import numpy as np
import torch

from naiad.backend import InferenceRequest, Tensor

from .device_views import DeviceViews

__all__ = ["copy_rows", "write_placed_outputs"]

# A request's rows of each output it placed on the GPU: the stand-in its response carries, or
# None where that request's rows go through the host.
Written = dict[str, list[Tensor | None]]

_BYTE = np.dtype(np.uint8)


def write_placed_outputs(
    requests: list[InferenceRequest],
    values: dict[str, Any],
    datatypes: dict[str, str],
    sizes: list[int],
    views: DeviceViews,
    held: ExitStack,
) -> Written:
    """Copy, on the current stream, each request's rows of every output it placed on the views'
    device into its region; the regions are held by `held`. `sizes` are the requests' batch
    sizes (empty for a model without batching: one request, the whole output)."""
    device = views.device
    written: Written = {}
    for name, value in values.items():
        if not isinstance(value, torch.Tensor) or value.device != device:
            continue
        placements = [_placement(request, name, device) for request in requests]
        if not any(placements):
            continue
        if sizes and (value.dim() == 0 or value.shape[0] != sum(sizes)):
            continue  # not one row per request: splitting it on the host says so
        row_shape = tuple(value.shape[1:]) if sizes else tuple(value.shape)
        row_bytes = math.prod(row_shape) * value.element_size()
        targets: list[torch.Tensor | None] = []
        stand_ins: list[Tensor | None] = []
        for rows, placement in zip(sizes or [1], placements):
            shape = (rows, *row_shape) if sizes else row_shape
            target = None if placement is None else _target(placement, rows * row_bytes, views, held)
            targets.append(target)
            stand_ins.append(
                None if target is None else Tensor.written_on_device(name, datatypes[name], shape, placement)
            )
        if any(stand_ins):
            copy_rows(value, sizes, targets)
            written[name] = stand_ins
    return written


def copy_rows(value: torch.Tensor, sizes: list[int], targets: list[torch.Tensor | None]) -> None:
    """Copy each request's rows of `value` (`sizes` rows each, in order; `[]`: one request, the
    whole tensor) into its target, a 1-D uint8 tensor of exactly their bytes, or nowhere for a
    None target: queued on the current stream by one copying call, four torch calls in all
    (each a hand-off of the interpreter lock). Call it under the instance's inference or
    no-grad mode: nothing here records gradients."""
    flat = value.reshape(-1).view(torch.uint8)
    row_bytes = flat.numel() // sum(sizes) if sizes else flat.numel()
    parts = torch.split(flat, [rows * row_bytes for rows in sizes]) if sizes else (flat,)
    pairs = [(target, part) for target, part in zip(targets, parts) if target is not None]
    if pairs:
        torch._foreach_copy_([target for target, _ in pairs], [part for _, part in pairs], non_blocking=True)


def _placement(request: InferenceRequest, name: str, device: torch.device) -> Any:
    for output in request.outputs:
        if output.name == name and output.placement is not None and output.placement.device_id == device.index:
            return output.placement
    return None


def _target(placement: Any, size: int, views: DeviceViews, held: ExitStack) -> torch.Tensor | None:
    """The region's first `size` bytes at the placement, as a tensor on the views' device; None
    where they do not fit or the region is gone."""
    if size > placement.byte_size:
        return None
    pointer = held.enter_context(placement.borrowed())
    if pointer is None:
        return None
    return views.tensor(pointer, (size,), _BYTE)
