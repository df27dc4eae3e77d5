"""Clients' CUDA shared memory in a model's process: the regions a request placed its inputs and
outputs in, opened here from their CUDA IPC handles, so that a model.py reads those inputs and
writes those outputs on the GPU, with no copy through the host.

The server sends a region's handle only while it holds the region (unregistering it waits).
`OpenRegions` opens each region the first time a request names it and keeps it open for the
requests after (a client registers a region once and uses it for many), until the server says
the region was unregistered (`ForgetRegions`, sent as it happens): opening a CUDA IPC handle is
not a cost to pay per request.

CUDA is reached through cuda-bindings (the `cuda-python` package) or CuPy, whichever the
model's environment has, loaded on the first region: a model that never sees one never loads
CUDA through this module.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

__all__ = ["DeviceRuntime", "OpenRegions", "device_runtime"]

IPC_HANDLE_SIZE = 64  # sizeof(cudaIpcMemHandle_t)


class DeviceRuntime(Protocol):
    def open(self, handle: bytes, device_id: int) -> int:
        """This process's address of the allocation another process exported as `handle`."""
        ...

    def close(self, address: int, device_id: int) -> None: ...

    def copy(self, destination: int, source: int, byte_size: int, device_id: int) -> None:
        """Copy between device (or host) addresses; the bytes have arrived when it returns."""
        ...

    def synchronize(self, device_id: int) -> None:
        """Wait for the work queued on `device_id` (the model's kernels that make an output)."""
        ...


class _CudaBindings:
    def __init__(self, runtime: Any) -> None:
        self._cuda = runtime

    def _check(self, result: Any, call: str) -> Any:
        error, *values = result if isinstance(result, tuple) else (result,)
        if error != self._cuda.cudaError_t.cudaSuccess:
            raise RuntimeError(f"{call} failed: {getattr(error, 'name', error)}")
        return values[0] if values else None

    def open(self, handle: bytes, device_id: int) -> int:
        self._check(self._cuda.cudaSetDevice(device_id), "cudaSetDevice")
        ipc = self._cuda.cudaIpcMemHandle_t()
        ctypes.memmove(ipc.getPtr(), handle, IPC_HANDLE_SIZE)
        flags = self._cuda.cudaIpcMemLazyEnablePeerAccess
        return int(self._check(self._cuda.cudaIpcOpenMemHandle(ipc, flags), "cudaIpcOpenMemHandle"))

    def close(self, address: int, device_id: int) -> None:
        self._check(self._cuda.cudaSetDevice(device_id), "cudaSetDevice")
        self._check(self._cuda.cudaIpcCloseMemHandle(address), "cudaIpcCloseMemHandle")

    def copy(self, destination: int, source: int, byte_size: int, device_id: int) -> None:
        self._check(self._cuda.cudaSetDevice(device_id), "cudaSetDevice")
        kind = self._cuda.cudaMemcpyKind.cudaMemcpyDefault
        self._check(self._cuda.cudaMemcpy(destination, source, byte_size, kind), "cudaMemcpy")

    def synchronize(self, device_id: int) -> None:
        self._check(self._cuda.cudaSetDevice(device_id), "cudaSetDevice")
        self._check(self._cuda.cudaDeviceSynchronize(), "cudaDeviceSynchronize")


class _CuPy:
    def __init__(self, cupy: Any) -> None:
        self._runtime = cupy.cuda.runtime
        self._device = cupy.cuda.Device

    def open(self, handle: bytes, device_id: int) -> int:
        with self._device(device_id):
            return int(self._runtime.ipcOpenMemHandle(handle))  # lazy peer access, CuPy's default

    def close(self, address: int, device_id: int) -> None:
        with self._device(device_id):
            self._runtime.ipcCloseMemHandle(address)

    def copy(self, destination: int, source: int, byte_size: int, device_id: int) -> None:
        with self._device(device_id):
            self._runtime.memcpy(destination, source, byte_size, self._runtime.memcpyDefault)

    def synchronize(self, device_id: int) -> None:
        with self._device(device_id):
            self._runtime.deviceSynchronize()


_runtime: DeviceRuntime | None = None


def device_runtime() -> DeviceRuntime:
    """CUDA for this process, loaded once; RuntimeError when neither library is installed."""
    global _runtime
    if _runtime is None:
        try:
            from cuda.bindings import runtime  # type: ignore[import-not-found]

            _runtime = _CudaBindings(runtime)
        except ImportError:
            try:
                import cupy  # type: ignore[import-not-found]
            except ImportError:
                raise RuntimeError(
                    "a request placed a tensor in CUDA shared memory, and this model's Python has "
                    "neither cuda-bindings (pip install cuda-python) nor CuPy to open it"
                ) from None
            _runtime = _CuPy(cupy)
    return _runtime


class OpenRegions:
    """The client regions this process has open, each opened once, closed by `forget`."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: dict[tuple[bytes, int], int] = {}

    def address(self, handle: bytes, device_id: int, offset: int) -> int:
        """The address, in this process, of the bytes `offset` into the region `handle`."""
        base = self._open.get((handle, device_id))
        if base is None:
            base = self._open[(handle, device_id)] = device_runtime().open(handle, device_id)
        return base + offset

    def forget(self, handles: list[bytes]) -> None:
        """Close the regions of these handles (unregistered); the others stay open."""
        for key in [key for key in self._open if key[0] in handles]:
            device_runtime().close(self._open.pop(key), key[1])
