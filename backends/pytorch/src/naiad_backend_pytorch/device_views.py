"""Tensors over bytes already on the GPU (a client's CUDA shared-memory region), made once per
address and kept: a client reuses its regions request after request (tritonclient's users make
one per connection), and wrapping an address in a tensor (`torch.as_tensor` reading a
`__cuda_array_interface__` and asking CUDA where the pointer lives) is work on the model home's
CPU, under the interpreter lock, for every request otherwise.

A kept tensor owns nothing: it is only used while its region is borrowed
(`CudaPlacement.borrowed`), and an address that comes back after its region was unregistered
is mapped again, to the same device (one cache per instance, and only placements on the
instance's device are looked up), so the kept tensor is right for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import torch

__all__ = ["DeviceView", "DeviceViews"]

# A request per connection at a time, a region or two each: thousands of connections fit.
_KEPT = 4096


class DeviceView:
    """`__cuda_array_interface__` over bytes already on the GPU, for torch.as_tensor."""

    def __init__(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "data": (pointer, False),
            "strides": None,
            "version": 3,
        }


Key = tuple[int, tuple[int, ...], str]


class DeviceViews:
    """One instance's tensors over device addresses, by (address, shape, dtype); the least
    recently used go past `kept`."""

    def __init__(
        self,
        device: torch.device,
        kept: int = _KEPT,
        wrap: Callable[[int, tuple[int, ...], np.dtype], torch.Tensor] | None = None,
    ) -> None:
        self._device = device
        self._kept = kept
        self._wrap = wrap or self._cuda_tensor
        self._tensors: OrderedDict[Key, torch.Tensor] = OrderedDict()

    @property
    def device(self) -> torch.device:
        return self._device

    def __len__(self) -> int:
        return len(self._tensors)

    def tensor(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype) -> torch.Tensor:
        """A tensor of `shape` and `dtype` over the bytes at `pointer` on the instance's device."""
        key = (pointer, shape, dtype.str)
        tensor = self._tensors.get(key)
        if tensor is None:
            tensor = self._tensors[key] = self._wrap(pointer, shape, dtype)
            if len(self._tensors) > self._kept:
                self._tensors.popitem(last=False)
        else:
            self._tensors.move_to_end(key)
        return tensor

    def _cuda_tensor(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype) -> torch.Tensor:
        return torch.as_tensor(DeviceView(pointer, shape, dtype), device=self._device)
