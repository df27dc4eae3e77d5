"""`DeviceArray`: a tensor's bytes in GPU memory, in a model's process: an input read in place
from the client's CUDA shared memory, or an output the model made on the GPU (a torch tensor,
a CuPy array, a DLPack capsule). `pb_utils.Tensor` holds one where Triton's Python backend
holds a GPU tensor: `is_cpu()` is false, `to_dlpack` hands out the device memory, and the
bytes reach the host only when they must (a response the client reads over the network).

It exposes `__cuda_array_interface__`, which torch (`torch.as_tensor(t, device="cuda")`) and
CuPy (`cupy.asarray(t)`) read without a copy; DLPack capsules come from whichever of the two is
installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .device_memory import device_runtime
from .dlpack_host import host_array

__all__ = ["DeviceArray", "KDL_CUDA", "device_array"]

KDL_CUDA = 2  # DLDeviceType of CUDA device memory


@dataclass(frozen=True, slots=True)
class DeviceArray:
    address: int
    device_id: int
    shape: tuple[int, ...]
    dtype: np.dtype
    # What keeps the memory alive: the model's own tensor, or None for a client's region (the
    # execute holds it open).
    owner: Any = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.address, False),
            "strides": None,
            "version": 3,
        }

    def dlpack(self) -> Any:
        """A DLPack capsule of the memory, made by torch or CuPy (no copy)."""
        try:
            import torch
        except ImportError:
            try:
                import cupy  # type: ignore[import-not-found]
            except ImportError:
                raise TypeError("a GPU tensor's DLPack form needs torch or CuPy installed, and neither is") from None
            return cupy.asarray(self).toDlpack()
        from torch.utils.dlpack import to_dlpack

        return to_dlpack(torch.as_tensor(self, device=f"cuda:{self.device_id}"))

    def to_host(self) -> np.ndarray:
        """A host copy, once the model's work on the GPU that makes it is done."""
        if self.owner is not None:
            return host_array(self.owner)
        host = np.empty(self.shape, self.dtype)
        runtime = device_runtime()
        runtime.synchronize(self.device_id)
        runtime.copy(host.ctypes.data, self.address, self.nbytes, self.device_id)
        return host


def device_array(source: Any, device_id: int) -> DeviceArray | None:
    """`source` (on GPU `device_id`) as a DeviceArray, without a copy when it is contiguous;
    None when its memory cannot be described so (the caller copies it to the host)."""
    if hasattr(source, "detach"):
        source = source.detach()  # torch refuses the interface on a tensor that needs grad
    interface = getattr(source, "__cuda_array_interface__", None)
    if interface is None:
        source = _imported(source)
        if source is None:
            return None
        interface = source.__cuda_array_interface__
    strides = interface.get("strides")
    dtype = np.dtype(interface["typestr"])
    shape = tuple(int(d) for d in interface["shape"])
    if strides is not None and tuple(strides) != _c_strides(shape, dtype.itemsize):
        made_contiguous = getattr(source, "contiguous", None)  # torch
        if made_contiguous is None:
            return None
        return device_array(made_contiguous(), device_id)
    return DeviceArray(int(interface["data"][0]), device_id, shape, dtype, source)


def _imported(source: Any) -> Any:
    """A capsule or another library's device tensor, imported by torch or CuPy (no copy)."""
    try:
        import torch
    except ImportError:
        try:
            import cupy  # type: ignore[import-not-found]
        except ImportError:
            return None
        return cupy.from_dlpack(source)
    return torch.from_dlpack(source)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))
