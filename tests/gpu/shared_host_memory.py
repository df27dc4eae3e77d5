"""A stand-in for CUDA that two processes share: each client "allocation" is a POSIX shared-memory
segment, and its "IPC handle" is the segment's name, so the server's registry (as the CUDA
runtime of naiad.cuda_runtime) and a model's process (as the DeviceRuntime of the Python
backend's device_memory.py) open the same bytes, and a test can follow a request's tensors
from a client's region into model.py and back on any machine.

`FakeGpuArray` is what a model would get from torch or CuPy on a GPU: an array that says it
lives on CUDA device 0 and describes its memory with `__cuda_array_interface__`.

Tests copy this file beside a model.py, which imports it."""

from __future__ import annotations

import ctypes
import mmap
import os
from typing import Any

import numpy as np

__all__ = ["SharedHostMemory", "FakeGpuArray", "handle_of"]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def handle_of(segment: str) -> bytes:
    return segment.encode().ljust(64, b"\0")


def _path(handle: bytes) -> str:
    return "/dev/shm/" + handle.rstrip(b"\0").decode()


class SharedHostMemory:
    def __init__(self) -> None:
        self._mapped: dict[int, int] = {}  # address -> size, of what `open` mapped
        self.opens = 0
        self._created: list[tuple[str, mmap.mmap]] = []
        self.synchronized = 0

    # -- a client's side ---------------------------------------------------------------------

    def allocate(self, segment: str, byte_size: int) -> np.ndarray:
        """A new zeroed "allocation" of `byte_size` bytes, whose handle is handle_of(segment)."""
        path = _path(handle_of(segment))
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, byte_size)
            view = mmap.mmap(fd, byte_size)
        finally:
            os.close(fd)
        self._created.append((path, view))
        return np.frombuffer(view, np.uint8)

    def free(self) -> None:
        for path, _ in self._created:
            os.unlink(path)
        self._created.clear()

    # -- what both the registry and a model's process call ------------------------------------

    def open(self, handle: bytes, device_id: int) -> int:
        try:
            fd = os.open(_path(handle), os.O_RDWR)
        except (OSError, UnicodeDecodeError):
            raise RuntimeError("cudaIpcOpenMemHandle failed: cudaErrorInvalidValue") from None
        try:
            size = os.fstat(fd).st_size
            address = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        finally:
            os.close(fd)
        if address in (None, ctypes.c_void_p(-1).value):
            raise RuntimeError("mmap failed")
        self._mapped[address] = size
        self.opens += 1
        return address

    def close(self, address: int, device_id: int) -> None:
        _libc.munmap(address, self._mapped.pop(address))

    def copy(self, destination: int, source: int, byte_size: int, device_id: int) -> None:
        ctypes.memmove(destination, source, byte_size)

    def synchronize(self, device_id: int) -> None:
        self.synchronized += 1

    @property
    def open_count(self) -> int:
        return len(self._mapped)

    # -- the registry's names for the same calls (naiad.cuda_runtime.CudaRuntime) --------------

    def open_ipc_handle(self, raw_handle: bytes, device_id: int) -> int:
        from naiad.cuda_runtime import CudaError

        try:
            return self.open(raw_handle, device_id)
        except RuntimeError as exc:
            raise CudaError(str(exc)) from None

    def close_ipc_handle(self, pointer: int, device_id: int) -> None:
        self.close(pointer, device_id)

    def allocation_size(self, pointer: int) -> int:
        return self._mapped[pointer]


class FakeGpuArray:
    """Host memory that presents itself as a CUDA array on device 0."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.ascontiguousarray(array)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)

    def __dlpack__(self, stream: Any = None) -> Any:
        raise BufferError("a fake GPU array has no DLPack capsule")

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.array.shape,
            "typestr": self.array.dtype.str,
            "data": (self.array.ctypes.data, False),
            "strides": None,
            "version": 3,
        }

    def cpu(self) -> np.ndarray:  # how a host copy is made of it, as of a torch tensor
        return self.array

    @staticmethod
    def read(tensor: Any) -> np.ndarray:
        """The values of a GPU tensor `pb_utils` handed the model (its interface's memory)."""
        interface = tensor.__cuda_array_interface__
        dtype = np.dtype(interface["typestr"])
        count = int(np.prod(interface["shape"]))
        buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(interface["data"][0])
        return np.frombuffer(buffer, dtype).reshape(interface["shape"]).copy()
