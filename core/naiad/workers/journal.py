"""What a worker started now must replay to join the others: the control operations applied
since start-up (explicit loads and unloads, shared-memory registrations, log and trace
settings), each kept only in its latest form.

Every worker keeps one; a restarted worker asks worker 0 for its entries before it serves.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

__all__ = ["Journal"]

Entry = tuple[str, tuple[Any, ...]]


class Journal:
    def __init__(self) -> None:
        self._entries: dict[Hashable, Entry] = {}
        self._lock = threading.Lock()  # control-plane threads record too

    def record(self, key: Hashable, operation: str, *arguments: Any) -> None:
        """`operation(*arguments)` is now the state of `key`; it moves to the end, so a replay
        applies entries in the order their latest form was applied."""
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (operation, arguments)

    def forget(self, match: Any) -> None:
        """Drop every entry whose key `match(key)` accepts (an unregistered region...)."""
        with self._lock:
            for key in [k for k in self._entries if match(k)]:
                del self._entries[key]

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())
