"""System shared-memory requests (register, unregister, status) as both protocols read them,
once their wire form is decoded into plain values."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import NaiadError, shown

__all__ = ["RegisterRequest", "register_request", "region_selector"]


@dataclass(frozen=True, slots=True)
class RegisterRequest:
    name: str
    key: str  # the shm_open key of the client's region
    offset: int
    byte_size: int


def register_request(name: str, key: object, offset: object = 0, byte_size: object = None) -> RegisterRequest:
    if not isinstance(key, str):
        raise NaiadError.invalid(f"registering shared memory region '{name}' needs a 'key' string")
    for field, value in (("offset", offset), ("byte_size", byte_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise NaiadError.invalid(
                f"registering shared memory region '{name}' needs an integer '{field}', got {shown(value)}"
            )
    assert isinstance(offset, int) and isinstance(byte_size, int)
    return RegisterRequest(name, key, offset, byte_size)


def region_selector(name: str | None) -> str | None:
    """The region a status or unregister request names; None (no name, or an empty one) means every region."""
    return name or None
