"""`Control`: the calls around a load step (model metadata and config, statistics, shared
memory regions), the same over both protocols."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Control"]


class Control(Protocol):
    """Answers are the KServe v2 JSON documents (gRPC's messages read into the same keys)."""

    async def model_metadata(self) -> dict[str, Any]: ...

    async def model_config(self) -> dict[str, Any]: ...

    async def model_statistics(self) -> dict[str, Any]: ...

    async def register_system_shm(self, name: str, key: str, byte_size: int) -> None: ...

    async def unregister_system_shm(self, name: str) -> None: ...

    async def close(self) -> None: ...
