"""Any DLPack producer (torch, CuPy, numpy, or a bare capsule) as a numpy array in host memory:
tensors cross between a model process and the server through host shared memory, so a tensor
on a GPU is copied to the host here, by the library that made it."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["host_array", "capsule_device", "dlpack_device"]

# DLDeviceType values whose memory the CPU can read.
_HOST_DEVICES = (1, 3)  # kDLCPU, kDLCUDAHost (pinned host memory)


def capsule_device(capsule: Any) -> tuple[int, int]:
    """(device type, device id) of a DLPack capsule: the capsule holds a DLManagedTensor, which
    starts with its DLTensor, whose data pointer is followed by its DLDevice (two int32s)."""
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, b"dltensor")  # ValueError for a used or foreign capsule
    device = (ctypes.c_int32 * 2).from_address(address + ctypes.sizeof(ctypes.c_void_p))
    return int(device[0]), int(device[1])


def dlpack_device(source: Any) -> tuple[int, int]:
    """(device type, device id) of a DLPack producer (host memory when it does not say) or of
    a bare capsule."""
    if hasattr(source, "__dlpack_device__"):
        device_type, device_id = source.__dlpack_device__()
        return int(device_type), int(device_id)
    if hasattr(source, "__dlpack__"):
        return (1, 0)
    return capsule_device(source)


class _Capsule:
    """A bare capsule as numpy's from_dlpack takes it (an object with `__dlpack__`)."""

    def __init__(self, capsule: Any, device: tuple[int, int]) -> None:
        self._capsule, self._device = capsule, device

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._device


def host_array(source: Any) -> np.ndarray:
    """`source` in host memory (no copy when it is there already)."""
    if hasattr(source, "__dlpack__"):
        device = dlpack_device(source)
        if device[0] in _HOST_DEVICES:
            return np.from_dlpack(source)
        if hasattr(source, "cpu"):  # torch
            return np.from_dlpack(source.detach().cpu() if hasattr(source, "detach") else source.cpu())
        if hasattr(source, "get"):  # CuPy
            return np.asarray(source.get())
        return _device_capsule_to_host(source)
    device = capsule_device(source)
    if device[0] in _HOST_DEVICES:
        return np.from_dlpack(_Capsule(source, device))
    return _device_capsule_to_host(source)


def _device_capsule_to_host(source: Any) -> np.ndarray:
    """A device tensor that is neither torch's nor CuPy's (or a bare capsule), read through
    whichever of the two is installed."""
    try:
        import torch
    except ImportError:
        try:
            import cupy  # type: ignore[import-not-found]
        except ImportError:
            raise TypeError("a tensor on a GPU can be read with torch or CuPy installed, and neither is") from None
        return np.asarray(cupy.from_dlpack(source).get())
    return np.from_dlpack(torch.from_dlpack(source).cpu())
