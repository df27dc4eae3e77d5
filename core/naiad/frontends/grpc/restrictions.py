"""`--grpc-restricted-protocol GROUPS:KEY=VALUE` on the gRPC service: which RPCs belong to
each of the groups `frontends.kserve.restrictions` defines for both protocols, and the guard that
answers a call without the header `triton-grpc-protocol-KEY: VALUE` with UNAVAILABLE
(tritonserver's header prefix, status and message)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from naiad_wire.grpc_status import RpcError, StatusCode

from ..kserve.restrictions import Restriction, parse_restrictions

__all__ = ["RPCS", "HEADER_PREFIX", "restricted_methods", "guard"]

HEADER_PREFIX = "triton-grpc-protocol-"

# The RPCs of each group (grpc.health.v1's Check and Watch are health too).
RPCS: dict[str, tuple[str, ...]] = {
    "health": ("ServerLive", "ServerReady", "ModelReady", "Check", "Watch"),
    "metadata": ("ServerMetadata", "ModelMetadata"),
    "inference": ("ModelInfer", "ModelStreamInfer"),
    "shared-memory": (
        "SystemSharedMemoryStatus",
        "SystemSharedMemoryRegister",
        "SystemSharedMemoryUnregister",
        "CudaSharedMemoryStatus",
        "CudaSharedMemoryRegister",
        "CudaSharedMemoryUnregister",
    ),
    "model-config": ("ModelConfig",),
    "model-repository": ("RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload"),
    "statistics": ("ModelStatistics",),
    "trace": ("TraceSetting",),
    "logging": ("LogSettings",),
}


def restricted_methods(specs: Iterable[str]) -> dict[str, Restriction]:
    """Flag values -> {RPC name: restriction}. Raises ValueError naming the fault."""
    by_group = parse_restrictions(specs, "--grpc-restricted-protocol", "protocol", HEADER_PREFIX)
    return {rpc: restriction for group, restriction in by_group.items() for rpc in RPCS[group]}


def _refuse_unless_allowed(restriction: Restriction, context: Any) -> None:
    if not restriction.allows(context.invocation_metadata() or ()):
        raise RpcError(StatusCode.UNAVAILABLE, f"This protocol is restricted, expecting header '{restriction.header}'")


def guard(implementation: Callable[..., Any], restriction: Restriction) -> Callable[..., Any]:
    """Wrap an RPC implementation so calls without the header end UNAVAILABLE."""
    if inspect.isasyncgenfunction(implementation):

        async def streaming(request: Any, context: Any) -> Any:
            _refuse_unless_allowed(restriction, context)
            async for item in implementation(request, context):
                yield item

        return streaming

    async def unary(request: Any, context: Any) -> Any:
        _refuse_unless_allowed(restriction, context)
        return await implementation(request, context)

    return unary
