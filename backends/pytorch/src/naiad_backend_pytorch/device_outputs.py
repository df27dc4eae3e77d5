"""Outputs a client placed in CUDA shared memory on the instance's own GPU, written there: each
request's rows are copied on the GPU from the model's output into the client's region, and its
response carries no bytes for them (`Tensor.written_on_device`), instead of the output crossing
to the host and the request's process copying it back to the GPU.

A request's output goes through the host as before where it placed it elsewhere (system shared
memory, another GPU, a region too small for it: that error is then the usual one), or where the
output is not a tensor on this GPU (BYTES). The regions are held (`CudaPlacement.borrowed`)
until the instance's stream has finished the copies: unregistering a region waits for that.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import numpy as np
import torch

from naiad.backend import InferenceRequest, Tensor

from .device_inputs import DeviceView

__all__ = ["write_placed_outputs"]

# A request's rows of each output it placed on the GPU: the stand-in its response carries, or
# None where that request's rows go through the host.
Written = dict[str, list[Tensor | None]]


def write_placed_outputs(
    requests: list[InferenceRequest],
    values: dict[str, Any],
    datatypes: dict[str, str],
    sizes: list[int],
    device: torch.device,
    held: ExitStack,
) -> Written:
    """Copy, on the current stream, each request's rows of every output it placed on `device`
    into its region; the regions are held by `held`. `sizes` are the requests' batch sizes
    (empty for a model without batching: one request, the whole output)."""
    written: Written = {}
    for name, value in values.items():
        if not isinstance(value, torch.Tensor) or value.device != device:
            continue
        placements = [_placement(request, name, device) for request in requests]
        if not any(placements):
            continue
        whole = value.detach().contiguous()
        if sizes and (whole.dim() == 0 or whole.shape[0] != sum(sizes)):
            continue  # not one row per request: splitting it on the host says so
        parts = torch.split(whole, sizes) if sizes else [whole]
        stand_ins: list[Tensor | None] = []
        for part, placement in zip(parts, placements):
            target = None if placement is None else _target(placement, part, device, held)
            if target is None:
                stand_ins.append(None)
                continue
            target.copy_(part.reshape(-1).view(torch.uint8), non_blocking=True)
            stand_ins.append(Tensor.written_on_device(name, datatypes[name], tuple(part.shape), placement))
        if any(stand_ins):
            written[name] = stand_ins
    return written


def _placement(request: InferenceRequest, name: str, device: torch.device) -> Any:
    for output in request.outputs:
        if output.name == name and output.placement is not None and output.placement.device_id == device.index:
            return output.placement
    return None


def _target(placement: Any, part: torch.Tensor, device: torch.device, held: ExitStack) -> torch.Tensor | None:
    """The region's bytes for `part`, as a tensor on `device`; None where they do not fit or
    the region is gone."""
    size = part.numel() * part.element_size()
    if size > placement.byte_size:
        return None
    pointer = held.enter_context(placement.borrowed())
    if pointer is None:
        return None
    return torch.as_tensor(DeviceView(pointer, (size,), np.dtype(np.uint8)), device=device)
