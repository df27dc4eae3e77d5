"""A stand-in for the CUDA runtime that keeps each client "allocation" in host memory (ctypes
copies where CUDA would copy), so the CUDA shared-memory registry's own logic, and what the
server builds on it, run on any machine."""

from __future__ import annotations

import ctypes

import numpy as np

from naiad.cuda_runtime import CudaError
from naiad.cuda_shared_memory import CudaSharedMemoryRegistry
from naiad.shared_memory import SharedMemoryRegistry

__all__ = ["HostMemoryRuntime", "registry_with_region"]


class HostMemoryRuntime:
    """What CudaRuntime does, with a client's allocations as host buffers keyed by handle."""

    def __init__(self) -> None:
        self.allocations: dict[bytes, np.ndarray] = {}
        self.opened: list[int] = []

    def allocate(self, handle: bytes, byte_size: int) -> np.ndarray:
        self.allocations[handle] = np.zeros(byte_size, np.uint8)
        return self.allocations[handle]

    def open_ipc_handle(self, raw_handle: bytes, device_id: int) -> int:
        if raw_handle not in self.allocations:
            raise CudaError("cudaIpcOpenMemHandle failed: cudaErrorInvalidValue")
        pointer = int(self.allocations[raw_handle].ctypes.data)
        self.opened.append(pointer)
        return pointer

    def close_ipc_handle(self, pointer: int, device_id: int) -> None:
        self.opened.remove(pointer)

    def allocation_size(self, pointer: int) -> int:
        return next(a.nbytes for a in self.allocations.values() if a.ctypes.data == pointer)

    def copy(self, destination: int, source: int, byte_size: int, device_id: int) -> None:
        ctypes.memmove(destination, source, byte_size)


def registry_with_region(
    device: HostMemoryRuntime, handle: bytes, byte_size: int, device_id: int
) -> SharedMemoryRegistry:
    """A server's shared-memory registry on the stand-in, with one CUDA region "gpu" of
    `byte_size` zeroed bytes on `device_id` registered."""
    registry = SharedMemoryRegistry(allow_client=True, cuda=CudaSharedMemoryRegistry(lambda: device))  # type: ignore[arg-type, return-value]
    device.allocate(handle, byte_size)
    registry.register_cuda("gpu", handle, device_id, byte_size)
    return registry
