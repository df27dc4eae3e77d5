"""The server's log settings: what `--log-*` flags set and the logging extension
(`GET/POST /v2/logging`, gRPC `LogSettings`) reads and changes live (all but the file).

Keys and JSON types follow Triton's logging extension: `log_file` (string, "" is stderr),
`log_info`, `log_warning`, `log_error` (booleans), `log_verbose_level` (integer >= 0),
`log_format` ("default" or "ISO8601"). Settings apply to Python's logging through one
handler on the root logger that this object owns.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, TextIO

from ..errors import NaiadError, shown

__all__ = ["LogSettings", "LOG_FORMATS", "VERBOSE"]

LOG_FORMATS = ("default", "ISO8601")
# Records logged at levels below DEBUG are more verbose: level DEBUG - k needs
# log_verbose_level >= k + 1. `VERBOSE` is DEBUG itself (needs level 1).
VERBOSE = logging.DEBUG


class _TritonStyleFormatter(logging.Formatter):
    """`I1121 22:01:08.685750 1234 naiad.server] message` or, in ISO8601,
    `2026-11-21T22:01:08Z I 1234 naiad.server] message`, as tritonserver lays out lines."""

    def __init__(self, layout: str) -> None:
        super().__init__()
        self.layout = layout

    def format(self, record: logging.LogRecord) -> str:
        letter = "E" if record.levelno >= logging.ERROR else "W" if record.levelno >= logging.WARNING else "I"
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        if self.layout == "ISO8601":
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
            return f"{stamp} {letter} {record.process} {record.name}] {message}"
        local = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        return f"{letter}{time.strftime('%m%d %H:%M:%S', local)}.{micros:06d} {record.process} {record.name}] {message}"


class LogSettings:
    """Validated log settings with get/update; `install()` makes them govern logging."""

    def __init__(
        self,
        log_file: str = "",
        log_info: bool = True,
        log_warning: bool = True,
        log_error: bool = True,
        log_verbose_level: int = 0,
        log_format: str = "default",
    ) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}
        self._handler: logging.Handler | None = None
        self._installed = False
        self._validate_into(
            self._values,
            {
                "log_file": log_file,
                "log_info": log_info,
                "log_warning": log_warning,
                "log_error": log_error,
                "log_verbose_level": log_verbose_level,
                "log_format": log_format,
            },
        )

    # -- the extension's view ------------------------------------------------------------

    def get(self) -> dict[str, Any]:
        """The settings as the logging extension returns them."""
        with self._lock:
            return dict(self._values)

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Apply `changes` (the logging extension's update, from a client: any subset of
        the keys; null values are ignored, as Triton ignores them) all or nothing, and
        return the new settings. Raises NaiadError (INVALID_ARG) naming the bad key.
        `log_file` names a file on the server: like Triton, only the command line sets it."""
        if not isinstance(changes, Mapping):
            raise NaiadError.invalid(f"log settings must be a JSON object, got {type(changes).__name__}")
        if changes.get("log_file") is not None:
            raise NaiadError.unsupported(
                "log file location can not be updated through network protocol (set it at start-up: --log-file PATH)"
            )
        with self._lock:
            values = dict(self._values)
            self._validate_into(values, {k: v for k, v in changes.items() if v is not None})
            self._values = values
        self._apply()
        return self.get()

    # -- applying them to Python logging -------------------------------------------------

    def install(self) -> None:
        """Route the process's logging through these settings (the CLI does this once)."""
        with self._lock:
            if self._installed:
                return
            self._handler = self._open_handler(self._values["log_file"])
            logging.getLogger().addHandler(self._handler)
            self._installed = True
        self._apply()

    def uninstall(self) -> None:
        with self._lock:
            if self._handler is not None:
                logging.getLogger().removeHandler(self._handler)
                self._close(self._handler)
                self._handler = None
            self._installed = False

    def allows(self, record: logging.LogRecord) -> bool:
        """Whether a record passes the info/warning/error switches and the verbose level."""
        level = record.levelno
        values = self._values
        if level >= logging.ERROR:
            return values["log_error"]
        if level >= logging.WARNING:
            return values["log_warning"]
        if level >= logging.INFO:
            return values["log_info"]
        return values["log_verbose_level"] >= VERBOSE - level + 1

    def _apply(self) -> None:
        if not self._installed or self._handler is None:
            return
        self._handler.setFormatter(_TritonStyleFormatter(self._values["log_format"]))
        verbose = self._values["log_verbose_level"]
        # The root level decides which records get built at all; the filter does the rest.
        logging.getLogger().setLevel(VERBOSE - verbose + 1 if verbose > 0 else logging.INFO)

    def _open_handler(self, path: str) -> logging.Handler:
        if path:
            try:
                handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
            except OSError as exc:
                raise NaiadError.invalid(f"log_file: cannot open '{path}': {exc.strerror or exc}") from None
        else:
            handler = logging.StreamHandler(_stderr())
        handler.addFilter(self.allows)
        return handler

    @staticmethod
    def _close(handler: logging.Handler) -> None:
        if isinstance(handler, logging.FileHandler):
            handler.close()

    @staticmethod
    def _validate_into(values: dict[str, Any], changes: Mapping[str, Any]) -> None:
        for key, value in changes.items():
            if key == "log_file":
                if not isinstance(value, str):
                    raise NaiadError.invalid(f"log_file must be a string, got {shown(value)}")
                if value and os.path.isdir(value):
                    raise NaiadError.invalid(f"log_file: '{value}' is a directory")
            elif key in ("log_info", "log_warning", "log_error"):
                if not isinstance(value, bool):
                    raise NaiadError.invalid(f"{key} must be a boolean, got {shown(value)}")
            elif key == "log_verbose_level":
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise NaiadError.invalid(f"log_verbose_level must be an integer >= 0, got {shown(value)}")
            elif key == "log_format":
                if value not in LOG_FORMATS:
                    raise NaiadError.invalid(f"log_format must be 'default' or 'ISO8601', got {shown(value)}")
            else:
                raise NaiadError.invalid(
                    f"unknown log setting '{key}' (known: log_file, log_info, log_warning, log_error, "
                    "log_verbose_level, log_format)"
                )
            values[key] = value


def _stderr() -> TextIO:
    return sys.stderr
