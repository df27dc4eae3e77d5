"""The system shared-memory extension: named POSIX shared-memory regions clients register,
and tensors read from or written into them. One registry per Server, shared by every
frontend, so a region registered over HTTP serves gRPC requests too."""

from __future__ import annotations

import mmap
import os
import threading
from dataclasses import dataclass

from .errors import ErrorCode, NaiadError

__all__ = ["SharedMemoryRegion", "SharedMemoryRegistry"]


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
    def __init__(self) -> None:
        self._regions: dict[str, SharedMemoryRegion] = {}
        self._lock = threading.Lock()

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map `byte_size` bytes at `offset` of the POSIX shared-memory object `key`."""
        if offset < 0 or byte_size <= 0:
            raise NaiadError.invalid(f"shared memory region '{name}': offset must be >= 0 and byte_size > 0")
        with self._lock:
            if name in self._regions:
                raise NaiadError(ErrorCode.ALREADY_EXISTS, f"shared memory region '{name}' already in manager")
            path = "/dev/shm/" + key.lstrip("/")
            try:
                fd = os.open(path, os.O_RDWR)
            except OSError as exc:
                raise NaiadError.invalid(
                    f"unable to open shared memory region '{name}' (key '{key}'): {exc.strerror}"
                ) from None
            try:
                size = os.fstat(fd).st_size
                if offset + byte_size > size:
                    raise NaiadError.invalid(
                        f"shared memory region '{name}': offset {offset} + byte_size {byte_size} "
                        f"exceeds the {size} bytes of '{key}'"
                    )
                mapped = mmap.mmap(fd, offset + byte_size)
            finally:
                os.close(fd)
            self._regions[name] = SharedMemoryRegion(name, key, offset, byte_size, mapped)

    def unregister(self, name: str | None = None) -> None:
        """Unregister one region, or every region when `name` is None."""
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
            raise NaiadError.not_found(f"unable to find system shared memory region: '{name}'")
        return [region.status()]

    def _region(self, name: str, offset: int, byte_size: int) -> SharedMemoryRegion:
        with self._lock:
            region = self._regions.get(name)
        if region is None:
            # NOT_FOUND, as Triton answers a tensor placed in a region it does not hold.
            raise NaiadError.not_found(f"unable to find system shared memory region: '{name}'")
        if offset < 0 or byte_size < 0 or offset + byte_size > region.byte_size:
            raise NaiadError.invalid(
                f"shared memory region '{name}': offset {offset} + byte_size {byte_size} is outside its "
                f"{region.byte_size} bytes"
            )
        return region

    def read(self, name: str, offset: int, byte_size: int) -> memoryview:
        """A view of `byte_size` bytes at `offset` inside the region (no copy)."""
        region = self._region(name, offset, byte_size)
        start = region.offset + offset
        return memoryview(region._map)[start : start + byte_size]

    def write(self, name: str, offset: int, data: bytes | memoryview, byte_size: int) -> None:
        """Copy `data` into the region; it must fit in `byte_size`."""
        if len(data) > byte_size:
            raise NaiadError.invalid(
                f"shared memory region '{name}': output needs {len(data)} bytes, {byte_size} were given"
            )
        region = self._region(name, offset, byte_size)
        start = region.offset + offset
        region._map[start : start + len(data)] = data
