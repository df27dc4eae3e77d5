"""Where a tensor placed in a registered region (system or CUDA) may lie: the one check both
kinds of region apply, worded as Triton words it."""

from __future__ import annotations

from .errors import NaiadError

__all__ = ["check_bounds"]


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
