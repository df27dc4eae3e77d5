"""`GrpcLane`: a `Lane` over one HTTP/2 connection of its own (`GrpcH2Connection`), sending
ModelInfer calls whose messages are already serialized and leaving the answers unparsed:
only the status matters here."""

from __future__ import annotations

import time

from .grpc_channel import SERVICE
from .grpc_h2_connection import GrpcCallFailed, GrpcH2Connection
from .lane import RequestFailed
from .target import Target

__all__ = ["GrpcLane"]

_METHOD = SERVICE + "ModelInfer"


class GrpcLane:
    def __init__(self, target: Target, connection: GrpcH2Connection) -> None:
        self._target = target
        self._connection = connection

    @classmethod
    async def open(cls, target: Target) -> GrpcLane:
        return cls(target, await GrpcH2Connection.open(target, _METHOD))

    async def infer(self, request: bytes) -> tuple[int, int]:
        if not self._connection.is_open:
            self._connection.close()
            self._connection = await GrpcH2Connection.open(self._target, _METHOD)
        start = time.perf_counter_ns()
        waiter = self._connection.call(request)
        sent = time.perf_counter_ns()
        try:
            first_byte_ns = await waiter
        except GrpcCallFailed as exc:
            raise RequestFailed(exc.message) from None
        except ConnectionError as exc:
            raise RequestFailed(f"the connection to {self._target} was lost: {exc}") from None
        return sent - start, time.perf_counter_ns() - first_byte_ns

    async def close(self) -> None:
        self._connection.close()
