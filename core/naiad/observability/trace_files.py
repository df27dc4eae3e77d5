"""triton trace mode's files: traces as JSON, written to `trace_file` as `log_frequency` says."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TraceFiles"]


class TraceFiles:
    """log_frequency > 0 writes `trace_file.N` files of that many traces each; 0 writes one
    `trace_file` when the server stops (`close`)."""

    def __init__(self) -> None:
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._index: dict[str, int] = {}
        self.written: set[str] = set()

    def add(self, path: str, entry: dict[str, Any], frequency: int) -> None:
        """Queue one trace for `path`; write a file every `frequency` traces (0: at close)."""
        pending = self._pending.setdefault(path, [])
        pending.append(entry)
        if frequency and len(pending) >= frequency:
            self._flush(path, final=False)

    def close(self) -> None:
        for path in list(self._pending):
            self._flush(path, final=True)

    def _flush(self, path: str, final: bool) -> None:
        entries = self._pending.pop(path, [])
        if not entries:
            return
        if final and path not in self._index:
            target = path
        else:
            index = self._index.get(path, 0)
            self._index[path] = index + 1
            target = f"{path}.{index}"
        with open(target, "w", encoding="utf-8") as f:
            json.dump(entries, f, indent=1)
        self.written.add(target)
