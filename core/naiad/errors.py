"""The one error type of naiad, and how its codes map onto HTTP statuses and gRPC codes.

Every layer raises or returns `NaiadError`; frontends translate it with the tables here so a
status is decided in exactly one place.
"""

from __future__ import annotations

import enum
import reprlib

__all__ = ["ErrorCode", "NaiadError", "HTTP_STATUS", "GRPC_STATUS_NAME", "shown"]


class ErrorCode(enum.Enum):
    """Triton's TRITONSERVER_Error codes."""

    UNKNOWN = "UNKNOWN"
    INTERNAL = "INTERNAL"
    NOT_FOUND = "NOT_FOUND"
    INVALID_ARG = "INVALID_ARG"
    UNAVAILABLE = "UNAVAILABLE"
    UNSUPPORTED = "UNSUPPORTED"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    CANCELLED = "CANCELLED"


class NaiadError(Exception):
    """An error with a status code; its message is what the client reads."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"NaiadError({self.code.name}, {self.message!r})"

    @classmethod
    def invalid(cls, message: str) -> NaiadError:
        return cls(ErrorCode.INVALID_ARG, message)

    @classmethod
    def not_found(cls, message: str) -> NaiadError:
        return cls(ErrorCode.NOT_FOUND, message)

    @classmethod
    def unavailable(cls, message: str) -> NaiadError:
        return cls(ErrorCode.UNAVAILABLE, message)

    @classmethod
    def internal(cls, message: str) -> NaiadError:
        return cls(ErrorCode.INTERNAL, message)

    @classmethod
    def cancelled_request(cls) -> NaiadError:
        return cls(ErrorCode.CANCELLED, "request was cancelled")

    @classmethod
    def unsupported(cls, message: str) -> NaiadError:
        return cls(ErrorCode.UNSUPPORTED, message)

    @classmethod
    def unexpected(cls, exc: BaseException) -> NaiadError:
        """INTERNAL for an exception nobody turned into a NaiadError (the caller logs it).
        The OS's own text is left out: it names server paths."""
        if isinstance(exc, OSError):
            return cls(ErrorCode.INTERNAL, f"internal error: {type(exc).__name__} (see the server log)")
        return cls(ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")


def _client_values() -> reprlib.Repr:
    shorten = reprlib.Repr()
    shorten.maxlevel = 3
    shorten.maxstring = 80
    shorten.maxother = 80
    shorten.maxlong = 80
    shorten.maxlist = shorten.maxtuple = shorten.maxdict = shorten.maxset = 8
    return shorten


_CLIENT_VALUES = _client_values()


def shown(value: object) -> str:
    """A value a client sent, as an error message shows it: its repr, cut short. A list
    nested a thousand deep (JSON allows it) or a megabyte-long string becomes a few dozen
    characters instead of a RecursionError or a megabyte of error text."""
    return _CLIENT_VALUES.repr(value)


# The statuses Triton's HTTP frontend answers with for each code. Measured against the real
# Triton (a Python model returning TritonError with each code): UNKNOWN, ALREADY_EXISTS and
# CANCELLED all answer 400, like INVALID_ARG.
HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.UNKNOWN: 400,
    ErrorCode.INTERNAL: 500,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.INVALID_ARG: 400,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.UNSUPPORTED: 501,
    ErrorCode.ALREADY_EXISTS: 400,
    ErrorCode.CANCELLED: 400,
}

# Names of grpc.StatusCode members, kept as strings so the core never imports grpc.
GRPC_STATUS_NAME: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN: "UNKNOWN",
    ErrorCode.INTERNAL: "INTERNAL",
    ErrorCode.NOT_FOUND: "NOT_FOUND",
    ErrorCode.INVALID_ARG: "INVALID_ARGUMENT",
    ErrorCode.UNAVAILABLE: "UNAVAILABLE",
    ErrorCode.UNSUPPORTED: "UNIMPLEMENTED",
    ErrorCode.ALREADY_EXISTS: "ALREADY_EXISTS",
    ErrorCode.CANCELLED: "CANCELLED",
}
