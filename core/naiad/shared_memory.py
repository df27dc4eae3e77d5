"""The shared-memory extensions: named POSIX shared-memory regions clients register (system
shared memory), and tensors read from or written into them; CUDA regions live in the
`CudaSharedMemoryRegistry` this registry holds (cuda_shared_memory.py), with which it shares
one namespace of region names, as Triton's one manager does. One registry per Server, shared
by every frontend, so a region registered over HTTP serves gRPC requests too.

A key is checked by `safe_names.check_shm_key` and opened through shm_open (the POSIX
shared-memory namespace, which never follows a link), never as a path. Registration is
off unless the server was started with `--allow-client-shm=true`, as in Triton since 26.04:
a client that can map server memory should be one the operator chose to trust."""

from __future__ import annotations

import _posixshmem
import logging
import mmap
import os
import stat
import threading
from dataclasses import dataclass

from .cuda_shared_memory import CudaSharedMemoryRegistry
from .datatypes import tensor_to_raw
from .device_placement import CudaPlacement
from .errors import ErrorCode, NaiadError
from .safe_names import check_shm_key
from .shared_memory_bounds import placed_region
from .tensor import Tensor

__all__ = ["CLIENT_SHM_DISABLED", "SharedMemoryRegion", "SharedMemoryRegistry"]

log = logging.getLogger("naiad.shared_memory")

# Triton's words, which its clients and tests match on.
CLIENT_SHM_DISABLED = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."


@dataclass(eq=False)
class SharedMemoryRegion:
    name: str
    key: str
    offset: int
    byte_size: int
    _map: mmap.mmap

    def status(self) -> dict[str, object]:
        return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}


class SharedMemoryRegistry:
    def __init__(self, allow_client: bool = False, cuda: CudaSharedMemoryRegistry | None = None) -> None:
        self.allow_client = allow_client
        self.cuda = CudaSharedMemoryRegistry() if cuda is None else cuda
        self._regions: dict[str, SharedMemoryRegion] = {}
        self._lock = threading.Lock()

    def check_client_allowed(self) -> None:
        """Refuse registering and unregistering (system or CUDA) unless the operator allowed it."""
        if not self.allow_client:
            raise NaiadError.unsupported(CLIENT_SHM_DISABLED)

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map `byte_size` bytes at `offset` of the POSIX shared-memory object `key`."""
        self.check_client_allowed()
        object_name = check_shm_key(name, key)
        if offset < 0 or byte_size <= 0:
            raise NaiadError.invalid(
                f"failed to register shared memory region '{name}': invalid args "
                f"(offset must be >= 0 and byte_size > 0, got {offset} and {byte_size})"
            )
        with self._lock:
            if name in self._regions or self.cuda.holds(name):
                raise NaiadError(ErrorCode.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")
            try:
                fd = _posixshmem.shm_open("/" + object_name, os.O_RDWR, mode=0o600)
            except OSError as exc:
                # The client reads only its own key back; the OS reason goes to the log.
                log.debug("shm_open('/%s') for region '%s' failed: %s", object_name, name, exc)
                raise NaiadError.invalid(f"Unable to open shared memory region: '{key}'") from None
            try:
                status = os.fstat(fd)
                if not stat.S_ISREG(status.st_mode):
                    raise NaiadError.invalid(f"Invalid shared memory region: '{key}'")
                if offset + byte_size > status.st_size:
                    raise NaiadError.invalid(
                        f"failed to register shared memory region '{name}': invalid args "
                        f"(offset {offset} + byte_size {byte_size} is beyond the {status.st_size} bytes of the "
                        "shared memory object)"
                    )
                try:
                    mapped = mmap.mmap(fd, offset + byte_size)
                except (OSError, ValueError) as exc:
                    log.debug("mmap of '/%s' for region '%s' failed: %s", object_name, name, exc)
                    raise NaiadError.invalid(
                        f"failed to register shared memory region '{name}': unable to map it"
                    ) from None
            finally:
                os.close(fd)
            self._regions[name] = SharedMemoryRegion(name, key, offset, byte_size, mapped)

    def unregister(self, name: str | None = None) -> None:
        """Unregister one region, or every region when `name` is None."""
        self.check_client_allowed()
        with self._lock:
            names = list(self._regions) if name is None else [name]
            for each in names:
                region = self._regions.pop(each, None)
                if region is not None:
                    try:
                        region._map.close()
                    except BufferError:
                        # A response still views it; the map closes when that is collected.
                        pass

    def status(self, name: str | None = None) -> list[dict[str, object]]:
        with self._lock:
            if name is None:
                return [r.status() for r in self._regions.values()]
            region = self._regions.get(name)
        if region is None:
            if self.cuda.holds(name):
                raise NaiadError.not_found(
                    f"The region named '{name}' is registered as CUDA shared memory, not system shared memory"
                )
            raise NaiadError.not_found(f"Unable to find system shared memory region: '{name}'")
        return [region.status()]

    # -- CUDA regions: the same rules of access, one namespace of names ---------------------

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Register a client's CUDA allocation (its IPC handle) as region `name`."""
        self.check_client_allowed()
        self.cuda.runtime(name)  # a server without CUDA refuses before anything else
        with self._lock:
            if name in self._regions:
                raise NaiadError(ErrorCode.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")
        self.cuda.register(name, raw_handle, device_id, byte_size)

    def unregister_cuda(self, name: str | None = None) -> None:
        """Unregister one CUDA region (a system region of that name stays), or every one."""
        self.check_client_allowed()
        self.cuda.unregister(name)

    def cuda_status(self, name: str | None = None) -> list[dict[str, object]]:
        if name is not None and not self.cuda.holds(name):
            with self._lock:
                system = name in self._regions
            if system:
                raise NaiadError.not_found(
                    f"The region named '{name}' is registered as system shared memory, not CUDA shared memory"
                )
        return self.cuda.status(name)

    # -- tensors in regions ------------------------------------------------------------------

    def _region(self, name: str, offset: int, byte_size: int) -> SharedMemoryRegion:
        return placed_region(self._regions, self._lock, name, offset, byte_size)

    def check(self, name: str, offset: int, byte_size: int) -> None:
        """Refuse a placement outside any region, before any inference runs."""
        if self.cuda.holds(name):
            self.cuda.check(name, offset, byte_size)
        else:
            self._region(name, offset, byte_size)

    def read(self, name: str, offset: int, byte_size: int) -> memoryview:
        """A view of `byte_size` bytes at `offset` inside the region (no copy; a CUDA
        region's bytes are copied to the host)."""
        if self.cuda.holds(name):
            return self.cuda.read(name, offset, byte_size)
        region = self._region(name, offset, byte_size)
        start = region.offset + offset
        return memoryview(region._map)[start : start + byte_size]

    def placement(self, name: str, offset: int, byte_size: int, datatype: str | None = None) -> CudaPlacement | None:
        """Where `byte_size` bytes at `offset` of region `name` sit on a GPU, for a backend on
        that GPU to read an input (of `datatype`) or write an output there itself. None for a
        region that is not CUDA's, for bytes outside it (reading or writing them is refused in
        the usual words), and for a BYTES input, which is reparsed on the host."""
        if datatype == "BYTES" or not self.cuda.holds(name):
            return None
        try:
            return self.cuda.placement(name, offset, byte_size)
        except NaiadError:
            return None

    def write_output(self, name: str, offset: int, byte_size: int, tensor: Tensor) -> None:
        """Place output `tensor` in the region: its bytes copied there, or nothing to copy
        when the backend wrote them on the GPU at that very place."""
        placement = tensor.placement
        if not tensor.on_host and placement is not None:
            if (placement.region, placement.offset) != (name, offset) or placement.byte_size > byte_size:
                raise NaiadError.internal(
                    f"output '{tensor.name}' was written to region '{placement.region}' at offset "
                    f"{placement.offset}, not where the request placed it ('{name}' at offset {offset})"
                )
            return
        self.write(name, offset, tensor_to_raw(tensor.datatype, tensor.data), byte_size, tensor.name)

    def write(self, name: str, offset: int, data: bytes | memoryview, byte_size: int, output: str) -> None:
        """Copy the bytes of `output` into the region; they must fit in `byte_size`."""
        if len(data) > byte_size:
            raise NaiadError.invalid(
                f"shared memory size specified with the request for output '{output}' ({byte_size} bytes) "
                f"should be at least {len(data)} bytes to hold the results"
            )
        if self.cuda.holds(name):
            self.cuda.write(name, offset, data, byte_size, output)
            return
        region = self._region(name, offset, byte_size)
        start = region.offset + offset
        region._map[start : start + len(data)] = data
