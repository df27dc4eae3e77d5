"""`GrpcLane`: a `Lane` over one gRPC channel of its own (grpc.aio), sending requests that
are already serialized and leaving the answers unparsed: only the status matters here."""

from __future__ import annotations

from typing import Any

from .grpc_channel import SERVICE, grpc_aio, open_channel, rpc_error_text
from .lane import RequestFailed
from .target import Target

__all__ = ["GrpcLane"]


class GrpcLane:
    def __init__(self, channel: Any) -> None:
        self._channel = channel
        # No serializers: the request goes as the bytes given, the answer comes back as bytes.
        self._call = channel.unary_unary(SERVICE + "ModelInfer")
        self._error = grpc_aio().AioRpcError

    @classmethod
    async def open(cls, target: Target) -> GrpcLane:
        channel = open_channel(target)
        return cls(channel)

    async def infer(self, request: bytes) -> tuple[int, int]:
        try:
            await self._call(request)
        except self._error as exc:
            raise RequestFailed(rpc_error_text(exc)) from None
        return 0, 0

    async def close(self) -> None:
        await self._channel.close()
