"""The answers every endpoint shares: JSON bodies, Triton's empty health answers, error
bodies `{"error": "..."}` with the status `errors.HTTP_STATUS` gives, response compression."""

from __future__ import annotations

import gzip
import logging
import zlib
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import Scope

from ...errors import HTTP_STATUS, NaiadError
from ..kserve.restrictions import Restriction
from .body import SUPPORTED_ENCODINGS, UnsupportedContentEncoding

__all__ = [
    "JSON",
    "BINARY",
    "json_response",
    "empty_response",
    "health_response",
    "error_response",
    "error_for",
    "forbidden",
    "compress",
]

log = logging.getLogger("naiad.http")

JSON = "application/json"
BINARY = "application/octet-stream"


def json_response(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type=JSON)


def empty_response(status: int = 200) -> Response:
    return Response(b"", status_code=status, media_type=JSON)


def health_response() -> Response:
    # Triton answers the health endpoints with an empty text/plain body.
    return Response(b"", media_type="text/plain")


def error_response(error: NaiadError) -> Response:
    if isinstance(error, UnsupportedContentEncoding):
        response = json_response({"error": error.message}, 415)
        response.headers["Accept-Encoding"] = SUPPORTED_ENCODINGS
        return response
    return json_response({"error": error.message}, HTTP_STATUS.get(error.code, 500))


def error_for(exc: Exception, scope: Scope) -> Response:
    """The JSON error answer for an exception; anything but NaiadError is a 500 naming it."""
    if isinstance(exc, NaiadError):
        return error_response(exc)
    log.error("unexpected error answering %s %s", scope.get("method"), scope.get("path"), exc_info=exc)
    return error_response(NaiadError.unexpected(exc))


def forbidden(restriction: Restriction) -> Response:
    """Triton's answer to a request of a restricted group without its header (`--http-restricted-api`)."""
    return json_response({"error": f"This API is restricted, expecting header '{restriction.header}'"}, 403)


def compress(content: bytes, accept_encoding: str | None) -> tuple[bytes, str]:
    """`content` gzip- or deflate-compressed when the client accepts one (tritonclient's
    `response_compression_algorithm`), with the Content-Encoding; "" when left alone."""
    if not accept_encoding:
        return content, ""
    names = {part.split(";")[0].strip().lower() for part in accept_encoding.split(",")}
    if "gzip" in names:
        return gzip.compress(content, compresslevel=6), "gzip"
    if "deflate" in names:
        return zlib.compress(content), "deflate"
    return content, ""
