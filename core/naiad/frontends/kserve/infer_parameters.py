"""Inference request parameters a frontend reads itself, rather than passing them to the
model: the ones Triton's clients set to steer how answers travel, and request headers
forwarded as parameters. Sequence, priority and timeout parameters are the core's
(`InferenceRequest.take_control_parameters`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ...errors import NaiadError, shown

__all__ = [
    "BINARY_DATA_OUTPUT",
    "EMPTY_FINAL_RESPONSE",
    "check_reserved_parameters",
    "forward_headers",
    "take_binary_data_output",
    "take_empty_final_response",
]

# HTTP: every output travels as binary data unless it says otherwise.
BINARY_DATA_OUTPUT = "binary_data_output"
# gRPC streaming: the client wants the empty response that closes a decoupled request
# (tritonclient: `enable_empty_final_response=True`).
EMPTY_FINAL_RESPONSE = "triton_enable_empty_final_response"
# Parameter names Triton keeps for itself (docs/protocol/extension_parameters.md): a client
# may not set `triton_*` ones it has no use for, nor send a header by any of these names
# where headers become parameters.
_RESERVED_PREFIX = "triton_"
_RESERVED_NAMES = frozenset(
    {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers", BINARY_DATA_OUTPUT}
)


def check_reserved_parameters(parameters: dict[str, Any], allowed: frozenset[str] = frozenset()) -> None:
    """Refuse a `triton_` parameter other than those in `allowed`, as Triton does."""
    for key in parameters:
        if key.startswith(_RESERVED_PREFIX) and key not in allowed:
            raise NaiadError.invalid(f"parameter '{key}' is reserved for Triton usage and cannot be specified")


def take_binary_data_output(parameters: dict[str, Any]) -> bool:
    """Remove and return `binary_data_output` (false when absent)."""
    value = parameters.pop(BINARY_DATA_OUTPUT, False)
    if not isinstance(value, bool):
        raise NaiadError.invalid(f"request parameter '{BINARY_DATA_OUTPUT}' must be true or false, got {shown(value)}")
    return value


def take_empty_final_response(parameters: dict[str, Any]) -> bool:
    """Remove and return `triton_enable_empty_final_response` (false when absent)."""
    return bool(parameters.pop(EMPTY_FINAL_RESPONSE, False))


def forward_headers(parameters: dict[str, Any], pattern: re.Pattern[str], headers: Iterable[tuple[str, str]]) -> None:
    """Request headers whose names match `pattern` become request parameters
    (--http-header-forward-pattern, --grpc-header-forward-pattern); a parameter the request
    sets itself wins. Names arrive lower-case; a header named as a reserved parameter is
    refused."""
    for key, value in headers:
        # Every header, forwarded or not: Triton refuses a request whose header could pose
        # as one of its own parameters.
        if key in _RESERVED_NAMES or key.startswith(_RESERVED_PREFIX):
            raise NaiadError.invalid(f"header '{key}' is reserved for Triton usage and cannot be used as a parameter")
        if pattern.search(key):
            parameters.setdefault(key, value)
