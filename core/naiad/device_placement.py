"""`CudaPlacement`: where an input's bytes also sit on a GPU, so that a backend running on that
GPU can read them there, device to device, instead of from the host.

An input a client placed in a CUDA shared-memory region is still read into host memory where
the request is decoded: every consumer of a request (schedulers, the response cache, ensembles,
the Python backend, tracing) reads `Tensor.data`, which stays the truth. The placement is an
addition: the region, offset and size the bytes came from. It crosses from a front door to the
model home as those plain values; every process has every region open (a registration is
applied in each), so the model home binds it to its own mapping of the region.

A backend that runs on the placement's GPU holds the bytes with `borrowed()` for as long as it
reads them (or `borrowed_handle()`, to open the region in a process of its own): unregistering
the region waits for that, so it never closes memory being read. A backend that keeps a region
open in its own process after that hears of its unregistering through
`placement.regions.on_unregistered`, and closes it there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["CudaPlacement", "DeviceRegions"]


class DeviceRegions(Protocol):
    """A process's CUDA shared-memory regions (cuda_shared_memory.CudaSharedMemoryRegistry)."""

    def borrowed(self, name: str, offset: int, byte_size: int) -> AbstractContextManager[int | None]: ...

    def borrowed_handle(self, name: str, offset: int, byte_size: int) -> AbstractContextManager[bytes | None]: ...

    def on_unregistered(self, listener: Callable[[bytes], None]) -> Callable[[], None]: ...


@dataclass(frozen=True, slots=True)
class CudaPlacement:
    region: str
    offset: int
    byte_size: int
    device_id: int
    # This process's regions, through which the bytes are reached; None where none is known
    # (then `borrowed` yields None and the host copy serves).
    regions: DeviceRegions | None = field(default=None, compare=False, repr=False)

    def plain(self) -> tuple[str, int, int, int]:
        """What crosses to another process."""
        return (self.region, self.offset, self.byte_size, self.device_id)

    @contextmanager
    def borrowed(self) -> Iterator[int | None]:
        """The bytes' device address, held until the block ends; None when the region was
        unregistered meanwhile (or no registry is known): read the host copy then."""
        if self.regions is None:
            yield None
            return
        with self.regions.borrowed(self.region, self.offset, self.byte_size) as pointer:
            yield pointer

    @contextmanager
    def borrowed_handle(self) -> Iterator[bytes | None]:
        """The region's CUDA IPC handle, held as `borrowed` holds the address, for a backend
        whose model runs in a process of its own (it opens the handle there; the bytes are
        `offset` past the address it gets); None as for `borrowed`."""
        if self.regions is None:
            yield None
            return
        with self.regions.borrowed_handle(self.region, self.offset, self.byte_size) as handle:
            yield handle
