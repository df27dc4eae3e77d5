"""The system shared-memory extension: named POSIX shared-memory regions clients register,
and tensors read from or written into them. One registry per Server, shared by every
frontend, so a region registered over HTTP serves gRPC requests too.

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

from .errors import ErrorCode, NaiadError
from .safe_names import check_shm_key

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
    def __init__(self, allow_client: bool = False) -> None:
        self.allow_client = allow_client
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
            if name in self._regions:
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
            raise NaiadError.not_found(f"Unable to find system shared memory region: '{name}'")
        return [region.status()]

    def _region(self, name: str, offset: int, byte_size: int) -> SharedMemoryRegion:
        with self._lock:
            region = self._regions.get(name)
        if region is None:
            # NOT_FOUND, as Triton answers a tensor placed in a region it does not hold.
            raise NaiadError.not_found(f"Unable to find shared memory region: '{name}'")
        if offset < 0 or offset >= region.byte_size:
            raise NaiadError.invalid(
                f"Invalid offset for shared memory region: '{name}' "
                f"(offset {offset}, the region holds {region.byte_size} bytes)"
            )
        if byte_size < 0 or offset + byte_size > region.byte_size:
            raise NaiadError.invalid(
                f"Invalid offset + byte size for shared memory region: '{name}' "
                f"(offset {offset} + byte_size {byte_size}, the region holds {region.byte_size} bytes)"
            )
        return region

    def read(self, name: str, offset: int, byte_size: int) -> memoryview:
        """A view of `byte_size` bytes at `offset` inside the region (no copy)."""
        region = self._region(name, offset, byte_size)
        start = region.offset + offset
        return memoryview(region._map)[start : start + byte_size]

    def write(self, name: str, offset: int, data: bytes | memoryview, byte_size: int, output: str) -> None:
        """Copy the bytes of `output` into the region; they must fit in `byte_size`."""
        if len(data) > byte_size:
            raise NaiadError.invalid(
                f"shared memory size specified with the request for output '{output}' ({byte_size} bytes) "
                f"should be at least {len(data)} bytes to hold the results"
            )
        region = self._region(name, offset, byte_size)
        start = region.offset + offset
        region._map[start : start + len(data)] = data
