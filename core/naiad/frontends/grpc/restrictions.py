"""`--grpc-restricted-protocol PROTOCOLS:KEY=VALUE`: groups of RPCs that answer only calls
carrying the header `triton-grpc-protocol-KEY: VALUE` (tritonserver's flag, header prefix
and UNAVAILABLE status), e.g. to keep model loading for an operator while inference stays
open."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from .rpc_status import RpcError, StatusCode

__all__ = ["PROTOCOLS", "HEADER_PREFIX", "Restriction", "parse_restrictions", "guard"]

HEADER_PREFIX = "triton-grpc-protocol-"

# Triton's protocol groups and the RPCs in each.
PROTOCOLS: dict[str, tuple[str, ...]] = {
    "health": ("ServerLive", "ServerReady", "ModelReady", "Check", "Watch"),
    "metadata": ("ServerMetadata", "ModelMetadata"),
    "inference": ("ModelInfer", "ModelStreamInfer"),
    "shared-memory": (
        "SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
        "CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister",
    ),
    "model-config": ("ModelConfig",),
    "model-repository": ("RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload"),
    "statistics": ("ModelStatistics",),
    "trace": ("TraceSetting",),
    "logging": ("LogSettings",),
}


@dataclass(frozen=True)
class Restriction:
    header: str  # full header name, lowercase as gRPC delivers it
    value: str

    def allows(self, context: Any) -> bool:
        return any(key == self.header and value == self.value for key, value in context.invocation_metadata() or ())

    @property
    def message(self) -> str:
        return f"This protocol is restricted, expecting header '{self.header}'"


def parse_restrictions(specs: list[str]) -> dict[str, Restriction]:
    """Flag values -> {method name: restriction}. Raises ValueError naming the fault."""
    by_method: dict[str, Restriction] = {}
    claimed: set[str] = set()
    for spec in specs:
        protocols, sep, setting = spec.partition(":")
        key, eq, value = setting.partition("=")
        if not sep or not eq or not key or not protocols:
            raise ValueError(f"--grpc-restricted-protocol: expected PROTOCOLS:KEY=VALUE, got '{spec}'")
        restriction = Restriction(HEADER_PREFIX + key.lower(), value)
        for protocol in (p.strip() for p in protocols.split(",")):
            if protocol not in PROTOCOLS:
                raise ValueError(
                    f"--grpc-restricted-protocol: unknown protocol '{protocol}' in '{spec}'; expected one of "
                    + ", ".join(PROTOCOLS)
                )
            if protocol in claimed:
                raise ValueError(f"--grpc-restricted-protocol: protocol '{protocol}' is restricted more than once")
            claimed.add(protocol)
            for method in PROTOCOLS[protocol]:
                by_method[method] = restriction
    return by_method


def guard(implementation: Callable[..., Any], restriction: Restriction) -> Callable[..., Any]:
    """Wrap an RPC implementation so calls without the header end UNAVAILABLE."""
    if inspect.isasyncgenfunction(implementation):

        async def streaming(request: Any, context: Any) -> Any:
            if not restriction.allows(context):
                raise RpcError(StatusCode.UNAVAILABLE, restriction.message)
            async for item in implementation(request, context):
                yield item

        return streaming

    async def unary(request: Any, context: Any) -> Any:
        if not restriction.allows(context):
            raise RpcError(StatusCode.UNAVAILABLE, restriction.message)
        return await implementation(request, context)

    return unary
