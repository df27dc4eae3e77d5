"""The CUDA runtime calls this backend needs, through cuda-python: device discovery,
compute capability, streams and device buffers. cuda-python returns `(error, value...)`
tuples; `_check` turns a failed call into CudaError naming the call."""

from __future__ import annotations

from typing import Any

__all__ = ["CudaError", "cudart", "gpu_count", "compute_capability", "set_device", "Stream", "DeviceBuffer"]


class CudaError(RuntimeError):
    pass


def cudart() -> Any:
    """The runtime bindings module (cuda-python 12.x and 13.x name it differently)."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        from cuda import cudart as runtime  # cuda-python < 12.6
    return runtime


def _check(result: Any, call: str) -> Any:
    runtime = cudart()
    error, *values = result if isinstance(result, tuple) else (result,)
    if error != runtime.cudaError_t.cudaSuccess:
        _, text = runtime.cudaGetErrorString(error)
        detail = text.decode() if isinstance(text, bytes) else str(text)
        raise CudaError(f"{call} failed: {getattr(error, 'name', error)} ({detail})")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def gpu_count() -> tuple[int, str]:
    """(number of CUDA devices, why there are none): a missing driver is not an error here,
    it is the answer."""
    try:
        runtime = cudart()
    except ImportError as exc:
        return 0, f"cuda-python is not installed ({exc})"
    try:
        error, count = runtime.cudaGetDeviceCount()
    except Exception as exc:  # noqa: BLE001 - the CUDA runtime library itself may be missing
        return 0, f"the CUDA runtime cannot be loaded ({exc})"
    if error != runtime.cudaError_t.cudaSuccess:
        return 0, f"cudaGetDeviceCount reports {getattr(error, 'name', error)}"
    return int(count), "" if count else "cudaGetDeviceCount reports 0 devices"


def set_device(device: int) -> None:
    _check(cudart().cudaSetDevice(device), f"cudaSetDevice({device})")


def compute_capability(device: int) -> tuple[int, int]:
    runtime = cudart()
    attr = runtime.cudaDeviceAttr
    major = _check(
        runtime.cudaDeviceGetAttribute(attr.cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute"
    )
    minor = _check(
        runtime.cudaDeviceGetAttribute(attr.cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute"
    )
    return int(major), int(minor)


class Stream:
    """A CUDA stream on the current device; `handle` is what TensorRT's execute takes."""

    def __init__(self) -> None:
        runtime = cudart()
        self._stream = _check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking), "cudaStreamCreate")

    @property
    def handle(self) -> int:
        return int(self._stream)

    @property
    def raw(self) -> Any:
        return self._stream

    def synchronize(self) -> None:
        _check(cudart().cudaStreamSynchronize(self._stream), "cudaStreamSynchronize")

    def destroy(self) -> None:
        if self._stream is not None:
            _check(cudart().cudaStreamDestroy(self._stream), "cudaStreamDestroy")
            self._stream = None


class DeviceBuffer:
    """Device memory that grows to the largest size asked for and is reused after."""

    def __init__(self) -> None:
        self.pointer = 0
        self.capacity = 0

    def ensure(self, nbytes: int) -> int:
        nbytes = max(nbytes, 1)
        if nbytes > self.capacity:
            self.free()
            self.pointer = int(_check(cudart().cudaMalloc(nbytes), f"cudaMalloc({nbytes})"))
            self.capacity = nbytes
        return self.pointer

    def upload(self, host_pointer: int, nbytes: int, stream: Stream) -> None:
        runtime = cudart()
        _check(
            runtime.cudaMemcpyAsync(
                self.pointer, host_pointer, nbytes, runtime.cudaMemcpyKind.cudaMemcpyHostToDevice, stream.raw
            ),
            "cudaMemcpyAsync(host to device)",
        )

    def download(self, host_pointer: int, nbytes: int, stream: Stream) -> None:
        runtime = cudart()
        _check(
            runtime.cudaMemcpyAsync(
                host_pointer, self.pointer, nbytes, runtime.cudaMemcpyKind.cudaMemcpyDeviceToHost, stream.raw
            ),
            "cudaMemcpyAsync(device to host)",
        )

    def free(self) -> None:
        if self.pointer:
            _check(cudart().cudaFree(self.pointer), "cudaFree")
            self.pointer = 0
            self.capacity = 0
