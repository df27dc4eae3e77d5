"""gRPC's framing on HTTP/2 (the "gRPC over HTTP2" spec): length-prefixed messages, their
compression (grpc-encoding), grpc-timeout and grpc-message. Bytes in and out; no I/O and no
protobuf."""

from __future__ import annotations

import zlib

from .grpc_status import RpcError, StatusCode

__all__ = [
    "ACCEPT_ENCODING",
    "ENCODINGS",
    "percent_encode",
    "parse_timeout",
    "message_at",
    "message_length",
    "decompress",
    "frame_message",
]

# zlib window bits per grpc-encoding: gzip framing, and "deflate", which gRPC means as zlib.
ENCODINGS = {"gzip": 31, "deflate": 15}
ACCEPT_ENCODING = "identity,deflate,gzip"
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def percent_encode(text: str) -> str:
    """grpc-message: bytes outside printable ASCII, and '%', as %XX (gRPC over HTTP/2 spec)."""
    raw = text.encode("utf-8")
    if all(0x20 <= b <= 0x7E and b != 0x25 for b in raw):
        return text
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in raw)


def parse_timeout(value: str) -> float | None:
    """A grpc-timeout in seconds; None when it is not one."""
    try:
        amount = int(value[:-1])
        return amount * _TIMEOUT_UNITS[value[-1]] if 0 <= amount < 10**8 else None
    except (KeyError, ValueError, IndexError):
        return None


def message_at(data: bytes | bytearray, position: int, limit: int) -> tuple[memoryview | None, bool, int]:
    """The message that starts at `position` of `data`: (payload, compressed, where the next
    starts), or (None, False, position) while it is incomplete. The payload is a view of
    `data` (no copy of what follows); the caller releases it. RESOURCE_EXHAUSTED above `limit`."""
    if len(data) - position < 5:
        return None, False, position
    length = message_length(data, position, limit)
    start = position + 5
    end = start + length
    if len(data) < end:
        return None, False, position
    return memoryview(data)[start:end], bool(data[position]), end


def message_length(data: bytes | bytearray, position: int, limit: int) -> int:
    """The length of the message whose 5-byte prefix starts at `position` of `data`;
    RESOURCE_EXHAUSTED above `limit`."""
    length = int.from_bytes(data[position + 1 : position + 5], "big")
    if length > limit:
        raise RpcError(StatusCode.RESOURCE_EXHAUSTED, f"Received message larger than max ({length} vs. {limit})")
    return length


def decompress(payload: bytes | memoryview, encoding: str | None, limit: int) -> bytes:
    """A compressed message's payload, inflated per the call's grpc-encoding (None: the call
    named none) to at most `limit` bytes."""
    if encoding is None:
        raise RpcError(StatusCode.INTERNAL, "a compressed message without a grpc-encoding")
    try:
        inflater = zlib.decompressobj(ENCODINGS[encoding])
        data = inflater.decompress(payload, limit + 1)
    except zlib.error as exc:
        raise RpcError(StatusCode.INTERNAL, f"cannot decompress the request message: {exc}") from None
    if len(data) > limit:
        raise RpcError(
            StatusCode.RESOURCE_EXHAUSTED, f"Received message larger than max (more than {limit} after decompression)"
        )
    return data


def frame_message(payload: bytes, limit: int, encoding: str | None = None, level: int = 0) -> bytes:
    """One length-prefixed message; compressed with `encoding` at zlib `level` when given.
    RESOURCE_EXHAUSTED when `payload` is larger than `limit`."""
    if len(payload) > limit:
        raise RpcError(StatusCode.RESOURCE_EXHAUSTED, f"Sent message larger than max ({len(payload)} vs. {limit})")
    if encoding is None:
        return b"\x00" + len(payload).to_bytes(4, "big") + payload
    deflater = zlib.compressobj(level, zlib.DEFLATED, ENCODINGS[encoding])
    payload = deflater.compress(payload) + deflater.flush()
    return b"\x01" + len(payload).to_bytes(4, "big") + payload
