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
    "forward_headers",
    "take_binary_data_output",
    "take_empty_final_response",
]

# HTTP: every output travels as binary data unless it says otherwise.
BINARY_DATA_OUTPUT = "binary_data_output"
# gRPC streaming: the client wants the empty response that closes a decoupled request
# (tritonclient: `enable_empty_final_response=True`).
EMPTY_FINAL_RESPONSE = "triton_enable_empty_final_response"


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
    sets itself wins."""
    for key, value in headers:
        if pattern.search(key):
            parameters.setdefault(key, value)
