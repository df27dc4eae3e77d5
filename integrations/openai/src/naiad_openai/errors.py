"""OpenAI's error answer: `{"error": {"message", "type", "param", "code"}}` with the HTTP status
naiad gives the error's code (404 for an unknown model, which the official client raises as
`NotFoundError`; 400 for a bad request as `BadRequestError`)."""

from __future__ import annotations

from typing import Any

from naiad import ErrorCode, NaiadError
from naiad.backend.helpers import HTTP_STATUS

__all__ = ["error_body", "error_status"]

_TYPES = {
    ErrorCode.INVALID_ARG: "invalid_request_error",
    ErrorCode.NOT_FOUND: "invalid_request_error",
    ErrorCode.UNSUPPORTED: "invalid_request_error",
}


def error_status(error: NaiadError) -> int:
    return HTTP_STATUS.get(error.code, 500)


def error_body(error: NaiadError) -> dict[str, Any]:
    code = "model_not_found" if error.code is ErrorCode.NOT_FOUND else None
    kind = _TYPES.get(error.code, "server_error")
    return {"error": {"message": error.message, "type": kind, "param": None, "code": code}}
