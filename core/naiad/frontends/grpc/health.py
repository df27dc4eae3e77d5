"""The standard `grpc.health.v1.Health` service: load balancers and Kubernetes gRPC probes
ask it whether the server can take requests.

Like Triton, every service name gets the server's readiness (SERVING when
`Server.is_ready()`, NOT_SERVING otherwise). `Watch` sends the status at once and again
whenever it changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ...protos import health_pb2 as pb
from ...server import Server
from ..kserve.restrictions import Restriction
from .rpc import RpcMethod
from .service import methods_from_descriptor

__all__ = ["HEALTH_SERVICE_NAME", "HealthServicer", "health_methods"]

HEALTH_SERVICE_NAME = "grpc.health.v1.Health"

_SERVING = pb.HealthCheckResponse.SERVING
_NOT_SERVING = pb.HealthCheckResponse.NOT_SERVING


class HealthServicer:
    def __init__(self, server: Server, watch_interval_s: float = 1.0) -> None:
        self.server = server
        self.watch_interval_s = watch_interval_s

    def _status(self) -> int:
        return _SERVING if self.server.is_ready() else _NOT_SERVING

    async def Check(self, request: pb.HealthCheckRequest, context: Any) -> pb.HealthCheckResponse:
        return pb.HealthCheckResponse(status=self._status())

    async def Watch(self, request: pb.HealthCheckRequest, context: Any) -> AsyncIterator[pb.HealthCheckResponse]:
        # The server has no readiness events to subscribe to; a cheap periodic look is
        # enough for probes, which care about changes on the scale of seconds.
        last = None
        while True:
            status = self._status()
            if status != last:
                last = status
                yield pb.HealthCheckResponse(status=status)
            await asyncio.sleep(self.watch_interval_s)


def health_methods(
    servicer: HealthServicer, restrictions: Mapping[str, Restriction] | None = None
) -> dict[str, RpcMethod]:
    return methods_from_descriptor(pb.DESCRIPTOR.services_by_name["Health"], pb, servicer, restrictions)
