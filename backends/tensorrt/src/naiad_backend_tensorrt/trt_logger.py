"""Routes TensorRT's log to Python logging and keeps its last error, so a failed engine
load can say why."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["make_logger"]

log = logging.getLogger("naiad.backends.tensorrt")


def make_logger(trt: Any) -> Any:
    severity = trt.ILogger.Severity
    levels = {
        severity.INTERNAL_ERROR: logging.CRITICAL,
        severity.ERROR: logging.ERROR,
        severity.WARNING: logging.WARNING,
        severity.INFO: logging.DEBUG,
        severity.VERBOSE: logging.DEBUG,
    }

    class Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.last_error = ""

        def log(self, level: Any, message: str) -> None:
            python_level = levels.get(level, logging.INFO)
            if python_level >= logging.ERROR:
                self.last_error = message
            log.log(python_level, "TensorRT: %s", message)

    return Logger()
