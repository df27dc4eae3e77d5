"""Server state a client changes through one worker and every worker must hold: shared-memory
registrations, trace settings and log settings. Each change is applied here first (so a bad
one is refused with this process's own error) and then handed to `replicate`, which applies
it on the other workers before the client gets its answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..observability.log_settings import LogSettings
from ..observability.tracing import TraceSettings, Tracing
from ..shared_memory import SharedMemoryRegistry

__all__ = ["Replicate", "ReplicatedSharedMemory", "ReplicatedTracing", "ReplicatedLogSettings"]

# (operation, *arguments): apply on every other worker; raises NaiadError when one refused.
Replicate = Callable[..., None]


class ReplicatedSharedMemory(SharedMemoryRegistry):
    """Every worker maps a region a client registers (the region is a named POSIX object
    any process of the user can open)."""

    def __init__(self, allow_client: bool, replicate: Replicate) -> None:
        super().__init__(allow_client)
        self._replicate = replicate

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        self.register_here(name, key, offset, byte_size)
        self._replicate("shm_register", name, key, offset, byte_size)

    def unregister(self, name: str | None = None) -> None:
        self.unregister_here(name)
        self._replicate("shm_unregister", name)

    def register_here(self, name: str, key: str, offset: int, byte_size: int) -> None:
        super().register(name, key, offset, byte_size)

    def unregister_here(self, name: str | None) -> None:
        super().unregister(name)


class ReplicatedTracing(Tracing):
    """Settings replicated; with `write_elsewhere`, the traces of a trace file go to the
    worker that writes them (worker 0: one file, as one server writes)."""

    def __init__(
        self,
        settings: TraceSettings | None,
        replicate: Replicate,
        write_elsewhere: Callable[[str, dict[str, Any], int], None] | None,
    ) -> None:
        super().__init__(settings)
        self._replicate = replicate
        self._write_elsewhere = write_elsewhere

    def add_file_entry(self, path: str, entry: dict[str, Any], frequency: int) -> None:
        if self._write_elsewhere is None:
            super().add_file_entry(path, entry, frequency)
        else:
            self._write_elsewhere(path, entry, frequency)

    def update(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        result = self.update_here(changes, model)
        self._replicate("trace", dict(changes), model)
        return result

    def update_here(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        return super().update(changes, model)


class ReplicatedLogSettings:
    """The process's installed LogSettings (the CLI installed that very object), with its
    updates replicated."""

    def __init__(self, local: LogSettings, replicate: Replicate) -> None:
        self.local = local
        self._replicate = replicate

    def get(self) -> dict[str, Any]:
        return self.local.get()

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        result = self.local.update(changes)
        self._replicate("log", dict(changes))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)
