"""The CUDA shared-memory extension: device memory a client allocated and exported as a CUDA
IPC handle, registered by name, that inference requests read inputs from and write outputs to.

The server opens the handle with `cudaIpcOpenMemHandle` in its own CUDA context; the region
stays the client's allocation (the client frees it after unregistering). CUDA is loaded on
the first registration, never at start-up: a server without cuda-bindings or without a GPU
refuses the registration with Triton's words for a server built without GPUs.

Region names share one namespace with system shared-memory regions, as in Triton:
`SharedMemoryRegistry` (shared_memory.py) holds one of these and asks it first."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .cuda_runtime import IPC_HANDLE_SIZE, CudaError, CudaRuntime, CudaUnavailable, load_cuda_runtime
from .device_placement import CudaPlacement
from .errors import ErrorCode, NaiadError
from .shared_memory_bounds import placed_region

__all__ = ["CudaSharedMemoryRegion", "CudaSharedMemoryRegistry", "gpus_not_supported", "UNREGISTER_WAIT_S"]

log = logging.getLogger("naiad.shared_memory")

RuntimeLoader = Callable[[], CudaRuntime]

# How long unregistering waits for executions that read a region in place (`borrowed`) to
# give it back before it is refused: such a borrow lasts one execution.
UNREGISTER_WAIT_S = 10.0


def gpus_not_supported(name: str) -> NaiadError:
    """Triton's answer (400 / INVALID_ARGUMENT) from a server that has no GPU support."""
    return NaiadError.invalid(f"failed to register CUDA shared memory region: '{name}', GPUs not supported")


@dataclass(eq=False)
class CudaSharedMemoryRegion:
    name: str
    device_id: int
    byte_size: int
    pointer: int  # this process's address of the client's allocation
    raw_handle: bytes  # the client's IPC handle of it, for a model process that opens it too
    borrowers: int = 0  # executions reading it in place now (`CudaSharedMemoryRegistry.borrowed`)

    def status(self) -> dict[str, object]:
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}


class CudaSharedMemoryRegistry:
    def __init__(self, load_runtime: RuntimeLoader = load_cuda_runtime) -> None:
        self._load_runtime = load_runtime
        self._runtime: CudaRuntime | None = None
        self._unavailable: str | None = None
        self._regions: dict[str, CudaSharedMemoryRegion] = {}
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)  # a borrow ended
        self._loading = threading.Lock()
        # Told the IPC handle of each region unregistered (`on_unregistered`).
        self._listeners: list[Callable[[bytes], None]] = []

    def runtime(self, name: str) -> CudaRuntime:
        """CUDA, loaded once; refused as Triton refuses it when this process has none."""
        with self._loading:
            if self._runtime is None and self._unavailable is None:
                try:
                    self._runtime = self._load_runtime()
                except CudaUnavailable as exc:
                    self._unavailable = str(exc)
                    log.info("CUDA shared memory is not available: %s", exc)
        if self._runtime is None:
            raise gpus_not_supported(name)
        return self._runtime

    def holds(self, name: str) -> bool:
        with self._lock:
            return name in self._regions

    def register(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Open the client's IPC handle on `device_id` and register `byte_size` bytes of it."""
        cuda = self.runtime(name)
        if len(raw_handle) != IPC_HANDLE_SIZE:
            raise NaiadError.invalid(
                f"'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t "
                f"({IPC_HANDLE_SIZE} bytes, got {len(raw_handle)})"
            )
        if device_id < 0 or byte_size <= 0:
            raise NaiadError.invalid(
                f"failed to register shared memory region '{name}': invalid args "
                f"(device_id must be >= 0 and byte_size > 0, got {device_id} and {byte_size})"
            )
        with self._lock:
            if name in self._regions:
                raise NaiadError(ErrorCode.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")
            try:
                pointer = cuda.open_ipc_handle(raw_handle, device_id)
            except CudaError as exc:
                # The client reads Triton's generic words; CUDA's reason goes to the log.
                log.error("failed to open CUDA IPC handle for region '%s': %s", name, exc)
                raise NaiadError.invalid("failed to register shared memory region: invalid args") from None
            try:
                size = cuda.allocation_size(pointer)
            except CudaError as exc:
                log.error("region '%s': %s", name, exc)
                size = -1
            if byte_size > size:
                cuda.close_ipc_handle(pointer, device_id)
                raise NaiadError.invalid(
                    f"failed to register shared memory region '{name}': invalid args "
                    f"(byte_size {byte_size} is beyond the {max(size, 0)} bytes of the allocation)"
                )
            self._regions[name] = CudaSharedMemoryRegion(name, device_id, byte_size, pointer, bytes(raw_handle))

    def unregister(self, name: str | None = None) -> None:
        """Unregister one region (a name it does not hold is no error), or every region. A
        region an execution reads in place is closed once it is given back: within
        UNREGISTER_WAIT_S, or the unregistering is refused and the region stays."""
        with self._lock:
            names = list(self._regions) if name is None else [name]
            regions = [self._regions[each] for each in names if each in self._regions]
            if not self._returned.wait_for(lambda: not any(r.borrowers for r in regions), UNREGISTER_WAIT_S):
                busy = ", ".join(f"'{r.name}'" for r in regions if r.borrowers)
                raise NaiadError.unavailable(
                    f"failed to unregister CUDA shared memory region {busy}: an inference is still reading it"
                )
            for region in regions:
                del self._regions[region.name]
        for region in regions:
            for listener in list(self._listeners):
                listener(region.raw_handle)
            assert self._runtime is not None  # a region was registered through it
            try:
                self._runtime.close_ipc_handle(region.pointer, region.device_id)
            except CudaError as exc:
                log.error("unregistering CUDA shared memory region '%s': %s", region.name, exc)
                raise NaiadError.internal(f"failed to close CUDA IPC handle of region '{region.name}'") from None

    def on_unregistered(self, listener: Callable[[bytes], None]) -> Callable[[], None]:
        """Call `listener` with the IPC handle of every region unregistered from now on (on
        the unregistering thread): a backend that keeps regions open in a process of its own
        closes them there. Returns what stops the calls."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def status(self, name: str | None = None) -> list[dict[str, object]]:
        with self._lock:
            if name is None:
                return [r.status() for r in self._regions.values()]
            region = self._regions.get(name)
        if region is None:
            raise NaiadError.not_found(f"Unable to find cuda shared memory region: '{name}'")
        return [region.status()]

    def _region(self, name: str, offset: int, byte_size: int) -> CudaSharedMemoryRegion:
        return placed_region(self._regions, self._lock, name, offset, byte_size)

    def check(self, name: str, offset: int, byte_size: int) -> None:
        """Refuse a placement outside the region, before any inference runs."""
        self._region(name, offset, byte_size)

    def placement(self, name: str, offset: int, byte_size: int) -> CudaPlacement:
        """Where `byte_size` bytes at `offset` of region `name` sit: on its GPU, reached
        through this registry."""
        region = self._region(name, offset, byte_size)
        return CudaPlacement(name, offset, byte_size, region.device_id, self)

    @contextmanager
    def borrowed(self, name: str, offset: int, byte_size: int) -> Iterator[int | None]:
        """The device address of `byte_size` bytes at `offset` in region `name`, held for
        the `with` block (unregistering waits for it), or None when the region is gone or
        no longer that large: the caller then uses the bytes' host copy."""
        with self._borrowing(name, offset, byte_size) as region:
            yield None if region is None else region.pointer + offset

    @contextmanager
    def borrowed_handle(self, name: str, offset: int, byte_size: int) -> Iterator[bytes | None]:
        """As `borrowed`, but the client's IPC handle of the whole region, for a model's own
        process to open: the bytes are `offset` past the address it opens to."""
        with self._borrowing(name, offset, byte_size) as region:
            yield None if region is None else region.raw_handle

    @contextmanager
    def _borrowing(self, name: str, offset: int, byte_size: int) -> Iterator[CudaSharedMemoryRegion | None]:
        with self._lock:
            region = self._regions.get(name)
            if region is None or offset < 0 or byte_size < 0 or offset + byte_size > region.byte_size:
                region = None
            else:
                region.borrowers += 1
        try:
            yield region
        finally:
            if region is not None:
                with self._lock:
                    region.borrowers -= 1
                    self._returned.notify_all()

    def read(self, name: str, offset: int, byte_size: int) -> memoryview:
        """A host copy of `byte_size` bytes at `offset` inside the region."""
        region = self._region(name, offset, byte_size)
        host = np.empty(byte_size, np.uint8)
        assert self._runtime is not None
        self._runtime.copy(host.ctypes.data, region.pointer + offset, byte_size, region.device_id)
        return memoryview(host)

    def write(self, name: str, offset: int, data: bytes | memoryview, byte_size: int, output: str) -> None:
        """Copy the host bytes of `output` into the region (SharedMemoryRegistry.write
        checked that they fit in `byte_size`)."""
        region = self._region(name, offset, byte_size)
        source = np.frombuffer(data, np.uint8) if len(data) else np.empty(0, np.uint8)
        assert self._runtime is not None
        self._runtime.copy(region.pointer + offset, source.ctypes.data, len(data), region.device_id)
