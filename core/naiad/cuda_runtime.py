"""The few CUDA calls the core makes itself (CUDA shared memory), through cuda-bindings
(the `cuda-python` package), imported on first use: a server that never sees a CUDA
region never loads the CUDA runtime, and a machine without it serves everything else.

cuda-bindings returns `(error, value...)` tuples; `_check` turns a failed call into
`CudaError` naming the call. The runtime's current device is per thread, so every call
that touches memory sets the region's device first (a cheap call once it is current)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

__all__ = ["CudaError", "CudaUnavailable", "CudaRuntime", "IPC_HANDLE_SIZE", "load_cuda_runtime"]

# sizeof(cudaIpcMemHandle_t): the bytes a client sends as the region's raw handle.
IPC_HANDLE_SIZE = 64


class CudaError(RuntimeError):
    """A CUDA call failed; the text names the call and CUDA's error."""


class CudaUnavailable(RuntimeError):
    """This process cannot use CUDA: no cuda-bindings, no driver, or no device."""


@dataclass(frozen=True)
class CudaRuntime:
    runtime: Any  # cuda.bindings.runtime
    driver: Any  # cuda.bindings.driver

    def _check(self, result: Any, call: str) -> Any:
        error, *values = result if isinstance(result, tuple) else (result,)
        if error != self.runtime.cudaError_t.cudaSuccess and error != self.driver.CUresult.CUDA_SUCCESS:
            raise CudaError(f"{call} failed: {getattr(error, 'name', error)}")
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    def device_count(self) -> int:
        return int(self._check(self.runtime.cudaGetDeviceCount(), "cudaGetDeviceCount"))

    def set_device(self, device_id: int) -> None:
        self._check(self.runtime.cudaSetDevice(device_id), f"cudaSetDevice({device_id})")

    def open_ipc_handle(self, raw_handle: bytes, device_id: int) -> int:
        """The device address of the allocation another process exported as `raw_handle`."""
        self.set_device(device_id)
        handle = self.runtime.cudaIpcMemHandle_t()
        # cuda-bindings 13 no longer exposes the handle's bytes as a field: they are written
        # through the address of the C struct, as tritonclient reads them.
        ctypes.memmove(handle.getPtr(), raw_handle, IPC_HANDLE_SIZE)
        pointer = self._check(
            self.runtime.cudaIpcOpenMemHandle(handle, self.runtime.cudaIpcMemLazyEnablePeerAccess),
            "cudaIpcOpenMemHandle",
        )
        return int(pointer)

    def close_ipc_handle(self, pointer: int, device_id: int) -> None:
        self.set_device(device_id)
        self._check(self.runtime.cudaIpcCloseMemHandle(pointer), "cudaIpcCloseMemHandle")

    def allocation_size(self, pointer: int) -> int:
        """Bytes of the allocation `pointer` starts (what a registered size must not exceed)."""
        _, size = self._check(
            self.driver.cuMemGetAddressRange(self.driver.CUdeviceptr(pointer)), "cuMemGetAddressRange"
        )
        return int(size)

    def copy(self, destination: int, source: int, byte_size: int, device_id: int) -> None:
        """Copy between any two addresses (host or device: unified addressing tells them
        apart); returns when the bytes have arrived."""
        if byte_size == 0:
            return
        self.set_device(device_id)
        self._check(
            self.runtime.cudaMemcpy(destination, source, byte_size, self.runtime.cudaMemcpyKind.cudaMemcpyDefault),
            "cudaMemcpy",
        )


def load_cuda_runtime() -> CudaRuntime:
    """The CUDA runtime with at least one device, or CudaUnavailable saying why not."""
    try:
        try:
            from cuda.bindings import driver, runtime
        except ImportError:
            from cuda import cuda as driver  # type: ignore[no-redef]  # cuda-python < 12.6
            from cuda import cudart as runtime  # type: ignore[no-redef]
    except ImportError as exc:
        raise CudaUnavailable(f"cuda-bindings is not installed ({exc})") from None
    cuda = CudaRuntime(runtime, driver)
    try:
        count = cuda.device_count()
    except Exception as exc:  # noqa: BLE001 - the driver library itself may be missing
        raise CudaUnavailable(f"the CUDA runtime finds no device ({exc})") from None
    if count == 0:
        raise CudaUnavailable("the CUDA runtime finds no device")
    return cuda
