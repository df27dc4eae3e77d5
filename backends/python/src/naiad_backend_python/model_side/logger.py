"""`Logger`: log lines from the model that appear in the server's log, tagged with the model."""

from __future__ import annotations

import enum

from .bridge import current_bridge
from .errors import text_argument

__all__ = ["Logger", "LogLevel"]


class Logger:
    """Log lines that appear in the server's log, tagged with the model. The levels are
    Triton's: the enum `Logger.LogLevel` and its members on `Logger` itself
    (`pb_utils.Logger.log(text, pb_utils.Logger.INFO)`)."""

    class LogLevel(enum.IntEnum):
        INFO = 0
        WARNING = 1
        ERROR = 2
        VERBOSE = 3

    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: LogLevel = LogLevel.INFO) -> None:
        text = text_argument(message, "Logger message")
        # Triton's binding takes only its enum: a plain number (or None) is a TypeError.
        if not isinstance(level, Logger.LogLevel):
            raise TypeError(f"Logger level must be a pb_utils.Logger.LogLevel, got {type(level).__name__}")
        bridge = current_bridge()
        if bridge is None:
            import sys

            print(text, file=sys.stderr)
            return
        bridge.log(int(level), text)

    @staticmethod
    def log_info(message: str) -> None:
        Logger.log(message, Logger.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        Logger.log(message, Logger.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        Logger.log(message, Logger.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        Logger.log(message, Logger.VERBOSE)


# naiad's earlier name for the levels, kept for models written against it.
LogLevel = Logger.LogLevel
