"""Where a tensor placed in a registered region (system or CUDA) may lie: the one look-up and
check both kinds of region apply, worded as Triton words them."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol, TypeVar

from .errors import NaiadError

__all__ = ["check_bounds", "placed_region"]


class _Region(Protocol):
    @property
    def byte_size(self) -> int: ...


RegionT = TypeVar("RegionT", bound=_Region)


def placed_region(
    regions: Mapping[str, RegionT], lock: threading.Lock, name: str, offset: int, byte_size: int
) -> RegionT:
    """The region `name` that `byte_size` bytes at `offset` are placed in: NOT_FOUND, as Triton
    answers, when `regions` (read under `lock`) holds none; INVALID_ARG when they lie outside it."""
    with lock:
        region = regions.get(name)
    if region is None:
        raise NaiadError.not_found(f"Unable to find shared memory region: '{name}'")
    check_bounds(name, offset, byte_size, region.byte_size)
    return region


def check_bounds(name: str, offset: int, byte_size: int, region_size: int) -> None:
    """Refuse `byte_size` bytes at `offset` unless they lie inside the region's `region_size`."""
    if offset < 0 or offset >= region_size:
        raise NaiadError.invalid(
            f"Invalid offset for shared memory region: '{name}' (offset {offset}, the region holds {region_size} bytes)"
        )
    if byte_size < 0 or offset + byte_size > region_size:
        raise NaiadError.invalid(
            f"Invalid offset + byte size for shared memory region: '{name}' "
            f"(offset {offset} + byte_size {byte_size}, the region holds {region_size} bytes)"
        )
