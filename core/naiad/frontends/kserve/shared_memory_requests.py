"""Shared-memory requests (register, unregister, status; system and CUDA) as both protocols
read them, once their wire form is decoded into plain values."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import NaiadError, shown

__all__ = ["RegisterRequest", "CudaRegisterRequest", "register_request", "cuda_register_request", "region_selector"]


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


@dataclass(frozen=True, slots=True)
class CudaRegisterRequest:
    name: str
    raw_handle: bytes  # the client's cudaIpcMemHandle_t
    device_id: int
    byte_size: int


def cuda_register_request(name: str, raw_handle: bytes, device_id: object, byte_size: object) -> CudaRegisterRequest:
    """`raw_handle` already decoded from its wire form (base64 in HTTP's JSON, bytes in gRPC)."""
    if not name:
        raise NaiadError.invalid("'region name' is necessary to register cuda shared memory region")
    for field, value in (("device_id", device_id), ("byte_size", byte_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise NaiadError.invalid(
                f"registering CUDA shared memory region '{name}' needs an integer '{field}', got {shown(value)}"
            )
    assert isinstance(device_id, int) and isinstance(byte_size, int)
    return CudaRegisterRequest(name, raw_handle, device_id, byte_size)


def region_selector(name: str | None) -> str | None:
    """The region a status or unregister request names; None (no name, or an empty one) means every region."""
    return name or None
