"""`GrpcControl`: `Control` over KServe v2 gRPC (inference.GRPCInferenceService)."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from ..protos import grpc_service_pb2 as pb
from .grpc_channel import SERVICE, grpc_aio, open_channel, rpc_error_text
from .load_error import LoadError, ServerUnreachable
from .target import Target

__all__ = ["GrpcControl"]

# A call that cannot connect fails after this long rather than waiting for the server.
_CONNECT_TIMEOUT_S = 10.0


class GrpcControl:
    def __init__(self, target: Target, model: str, version: str) -> None:
        self._target = target
        self._model = model
        self._version = version
        self._channel = open_channel(target)

    async def model_metadata(self) -> dict[str, Any]:
        request = pb.ModelMetadataRequest(name=self._model, version=self._version)
        return _as_dict(await self._call("ModelMetadata", request, pb.ModelMetadataResponse))

    async def model_config(self) -> dict[str, Any]:
        request = pb.ModelConfigRequest(name=self._model, version=self._version)
        answer = await self._call("ModelConfig", request, pb.ModelConfigResponse)
        return _as_dict(answer.config)  # type: ignore[attr-defined]

    async def model_statistics(self) -> dict[str, Any]:
        request = pb.ModelStatisticsRequest(name=self._model, version=self._version)
        return _as_dict(await self._call("ModelStatistics", request, pb.ModelStatisticsResponse))

    async def register_system_shm(self, name: str, key: str, byte_size: int) -> None:
        request = pb.SystemSharedMemoryRegisterRequest(name=name, key=key, offset=0, byte_size=byte_size)
        await self._call("SystemSharedMemoryRegister", request, pb.SystemSharedMemoryRegisterResponse)

    async def unregister_system_shm(self, name: str) -> None:
        request = pb.SystemSharedMemoryUnregisterRequest(name=name)
        await self._call("SystemSharedMemoryUnregister", request, pb.SystemSharedMemoryUnregisterResponse)

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: str, request: Message, answer_type: type[Message]) -> Message:
        aio = grpc_aio()
        call = self._channel.unary_unary(
            SERVICE + method,
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=answer_type.FromString,
        )
        try:
            answer: Message = await call(request, timeout=_CONNECT_TIMEOUT_S, wait_for_ready=False)
        except aio.AioRpcError as exc:
            if exc.code().name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                raise ServerUnreachable(
                    f"cannot reach the server at {self._target} over gRPC: {rpc_error_text(exc)}"
                ) from None
            raise LoadError(f"{method}: {rpc_error_text(exc)}") from None
        return answer


def _as_dict(message: Message) -> dict[str, Any]:
    """The message as the HTTP endpoint's JSON spells it (field names as in the proto)."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)
