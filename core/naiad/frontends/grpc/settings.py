"""The trace and log settings the TraceSetting and LogSettings RPCs report.

Tracing is not implemented yet, so its settings are Triton's defaults and a request to
change them is refused; of the log settings, the verbose level takes effect (it switches
naiad's loggers between INFO and DEBUG) and the others are reported as they stand.
"""

from __future__ import annotations

import logging
from typing import Any

from ...errors import NaiadError

__all__ = ["FrontendSettings"]


class FrontendSettings:
    def __init__(self, log_verbose: int = 0) -> None:
        self.trace: dict[str, list[str]] = {
            "trace_level": ["OFF"],
            "trace_rate": ["1000"],
            "trace_count": ["-1"],
            "log_frequency": ["0"],
            "trace_file": [""],
            "trace_mode": ["triton"],
        }
        self.log: dict[str, Any] = {
            "log_file": "",
            "log_info": True,
            "log_warning": True,
            "log_error": True,
            "log_verbose_level": int(log_verbose),
            "log_format": "default",
        }

    def update_trace(self, updates: dict[str, list[str]]) -> dict[str, list[str]]:
        changed = [key for key, value in updates.items() if self.trace.get(key) != value]
        if changed:
            raise NaiadError.unsupported(
                "changing trace settings is not supported yet (asked to change " + ", ".join(sorted(changed)) + ")"
            )
        return dict(self.trace)

    def update_log(self, updates: dict[str, Any]) -> dict[str, Any]:
        unknown = [key for key in updates if key not in self.log]
        if unknown:
            raise NaiadError.invalid("unknown log setting(s): " + ", ".join(sorted(unknown)))
        for key, value in updates.items():
            if key == "log_verbose_level":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise NaiadError.invalid("log setting 'log_verbose_level' must be an unsigned integer")
                self.log[key] = value
                level = logging.DEBUG if value > 0 else logging.INFO
                logging.getLogger("naiad").setLevel(level)
            elif value != self.log[key]:
                raise NaiadError.unsupported(f"changing log setting '{key}' is not supported yet")
        return dict(self.log)
