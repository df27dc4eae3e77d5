"""Server state a client changes through one front door: shared-memory registrations and log
settings, which every process must hold, and trace settings, which the model home holds.
A change every process holds is applied here first (so a bad one is refused with this
process's own error) and then handed to `replicate`, which applies it on the other processes
before the client gets its answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from ..observability.log_settings import LogSettings
from ..observability.trace_settings import TraceSettings
from ..observability.tracing import Tracing
from ..shared_memory import SharedMemoryRegistry

__all__ = ["Replicate", "ReplicatedSharedMemory", "HomeTracing", "SharedTracing", "ReplicatedLogSettings"]

# (operation, *arguments): apply on every other process; raises NaiadError when one refused.
Replicate = Callable[..., None]


class ReplicatedSharedMemory(SharedMemoryRegistry):
    """Every front door maps a region a client registers (a system region is a named POSIX
    object any process of the user can open; a CUDA region's IPC handle opens in any process
    on the machine): each reads its clients' inputs from it and writes their outputs into it,
    and the model home holds it too."""

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

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        self.register_cuda_here(name, raw_handle, device_id, byte_size)
        self._replicate("cuda_shm_register", name, raw_handle, device_id, byte_size)

    def unregister_cuda(self, name: str | None = None) -> None:
        self.unregister_cuda_here(name)
        self._replicate("cuda_shm_unregister", name)

    def register_cuda_here(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        super().register_cuda(name, raw_handle, device_id, byte_size)

    def unregister_cuda_here(self, name: str | None) -> None:
        super().unregister_cuda(name)


class HomeTracing(Tracing):
    """Trace settings as a front door's frontends see them: requests are traced where they
    run, in the model home, so its settings are the server's; reading or changing them asks
    the model home (`ask(operation, *arguments)`)."""

    def __init__(self, ask: Callable[..., Any]) -> None:
        super().__init__(None)
        self._ask = ask

    def get(self, model: str = "") -> dict[str, Any]:
        result: dict[str, Any] = self._ask("trace_get", model)
        return result

    def update(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        result: dict[str, Any] = self._ask("trace_update", dict(changes), model)
        return result

    async def change(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        # The model home answers once every worker's journal holds the change: not on the loop.
        return await asyncio.to_thread(self.update, changes, model)


class SharedTracing(Tracing):
    """The model home's tracing: a change to its settings, whichever worker a client sent it
    through, is recorded in every worker's journal (`share`: done once they hold it)."""

    def __init__(self, settings: TraceSettings | None, share: Callable[..., Future[None]]) -> None:
        super().__init__(settings)
        self._share = share

    def update(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        """Change the settings and tell the other workers, without waiting for them."""
        return self._change_here(changes, model)[0]

    async def change(self, changes: Mapping[str, Any], model: str = "") -> dict[str, Any]:
        result, shared = self._change_here(changes, model)
        await asyncio.wrap_future(shared)
        return result

    def _change_here(self, changes: Mapping[str, Any], model: str) -> tuple[dict[str, Any], Future[None]]:
        result = super().update(changes, model)
        return result, self._share("trace", dict(changes), model)


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
