"""The model API's errors: `TritonError` (in a response) and `TritonModelException` (a misuse
of the API), and the check of its text arguments."""

from __future__ import annotations

from typing import Any

__all__ = ["TritonError", "TritonModelException", "text_argument"]


def text_argument(value: Any, what: str) -> str:
    """A string argument of the API as Triton's stub takes it: `str`, or `bytes` read as UTF-8
    (its C++ binding turns both into a std::string and hands back `str`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise TritonModelException(f"{what} must be UTF-8 text, got {bytes(value)!r}") from None
    raise TypeError(f"{what} must be a str (or bytes), got {type(value).__name__}")


class TritonError(Exception):
    """An error a model puts into an `InferenceResponse` (or raises); its code decides the
    HTTP status and gRPC code the client sees."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    CODE_NAMES = (
        "UNKNOWN",
        "INTERNAL",
        "NOT_FOUND",
        "INVALID_ARG",
        "UNAVAILABLE",
        "UNSUPPORTED",
        "ALREADY_EXISTS",
        "CANCELLED",
    )

    def __init__(self, message: str = "", code: int = INTERNAL) -> None:
        message = text_argument(message, "TritonError message")
        super().__init__(message)
        if code not in range(len(self.CODE_NAMES)):
            raise TritonModelException(f"TritonError code {code!r} is not one of TritonError's codes")
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def code_name(self) -> str:
        return self.CODE_NAMES[self._code]

    @classmethod
    def from_code_name(cls, name: str, message: str) -> TritonError:
        code = cls.CODE_NAMES.index(name) if name in cls.CODE_NAMES else cls.INTERNAL
        return cls(message, code)

    def __str__(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self.code_name()})"


class TritonModelException(Exception):
    """Raised by this API when a model uses it wrongly; a model may raise it too."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self._message = message

    def message(self) -> str:
        return self._message
