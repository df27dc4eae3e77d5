"""Pinned host memory a GPU instance stacks its batches into.

Stacking a batch into page-locked memory that the instance keeps makes the copy to the GPU an
asynchronous DMA on the instance's stream (pageable memory is staged by the driver, at a
fraction of the speed, holding the calling thread), and spares each batch a fresh allocation
of its size. One buffer per input, grown when a batch needs more, reused by the next batch:
the instance waits for its outputs before it stacks again, so the last copy out of the buffer
has finished by then.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["PinnedStaging"]


class PinnedStaging:
    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}

    def __call__(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """A pinned array of `shape` for input `name` (stacking's `into`); None for what
        cannot be pinned (strings)."""
        if dtype.hasobject:
            return None
        size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        buffer = self._buffers.get(name)
        if buffer is None or buffer.numel() < size:
            # Doubling keeps the number of (slow) page-locking allocations logarithmic.
            capacity = max(size, 2 * buffer.numel() if buffer is not None else 0)
            buffer = torch.empty(capacity, dtype=torch.uint8, pin_memory=True)
            self._buffers[name] = buffer
        return buffer.numpy()[:size].view(dtype).reshape(shape)
