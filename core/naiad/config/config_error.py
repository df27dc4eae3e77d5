"""The error an invalid model configuration raises."""

from __future__ import annotations

from ..errors import ErrorCode, NaiadError

__all__ = ["ConfigError"]


class ConfigError(NaiadError):
    """An invalid model configuration; the message names model, field and fault."""

    def __init__(self, model: str, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(ErrorCode.INVALID_ARG, f"model '{model}': {message}")
        self.model = model
        # Where in config.pbtxt, when the parser that refused it said (counting from 1).
        self.line = line
        self.column = column
