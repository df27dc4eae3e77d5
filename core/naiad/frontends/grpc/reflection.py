"""gRPC server reflection, so grpcurl, Postman and grpcio's reflection client can list
naiad's services and fetch their definitions without a copy of the .proto files.

`grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo` answers each request on the
stream in order from naiad's own descriptor pool, where the generated modules registered
grpc_service.proto, model_config.proto, health.proto and reflection.proto. The v1 service
(`grpc.reflection.v1.ServerReflection`) has the same messages on the wire, so the same
servicer answers it too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor

from naiad_wire.grpc_status import StatusCode

from ...protos import reflection_pb2 as pb
from ...protos._pool import POOL
from .rpc import RpcMethod
from .service import methods_from_descriptor

__all__ = ["REFLECTION_SERVICE_NAME", "ReflectionServicer", "reflection_methods"]

REFLECTION_SERVICE_NAME = "grpc.reflection.v1alpha.ServerReflection"
_V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"


class ReflectionServicer:
    def __init__(self, service_names: Iterable[str]) -> None:
        # What list_services answers: the services the server serves, reflection included.
        self.service_names = sorted(set(service_names) | {REFLECTION_SERVICE_NAME})

    async def ServerReflectionInfo(
        self, requests: AsyncIterator[pb.ServerReflectionRequest], context: Any
    ) -> AsyncIterator[pb.ServerReflectionResponse]:
        async for request in requests:
            yield self.answer(request)

    def answer(self, request: pb.ServerReflectionRequest) -> pb.ServerReflectionResponse:
        response = pb.ServerReflectionResponse(valid_host=request.host, original_request=request)
        kind = request.WhichOneof("message_request")
        try:
            if kind == "list_services":
                response.list_services_response.service.extend(
                    pb.ServiceResponse(name=name) for name in self.service_names
                )
            elif kind == "file_by_filename":
                _put_files(response, POOL.FindFileByName(request.file_by_filename))
            elif kind == "file_containing_symbol":
                _put_files(response, _file_containing(request.file_containing_symbol))
            elif kind == "file_containing_extension":
                wanted = request.file_containing_extension
                message = POOL.FindMessageTypeByName(wanted.containing_type)
                extension = POOL.FindExtensionByNumber(message, wanted.extension_number)
                _put_files(response, extension.file)
            elif kind == "all_extension_numbers_of_type":
                message = POOL.FindMessageTypeByName(request.all_extension_numbers_of_type)
                numbers = response.all_extension_numbers_response
                numbers.base_type_name = message.full_name
                numbers.extension_number.extend(sorted(e.number for e in POOL.FindAllExtensions(message)))
            else:
                _put_error(response, StatusCode.INVALID_ARGUMENT, "the request asks for nothing (no message_request)")
        except KeyError:
            asked = getattr(request, kind)
            if not isinstance(asked, str):
                asked = f"{asked.containing_type} extension {asked.extension_number}"
            _put_error(response, StatusCode.NOT_FOUND, f"{kind.replace('_', ' ')}: not found: {asked}")
        return response


def _file_containing(symbol: str) -> FileDescriptor:
    try:
        return POOL.FindFileContainingSymbol(symbol)
    except KeyError:
        # The pool does not find methods by name; a method's file is its service's.
        service_name, _, method = symbol.rpartition(".")
        service = POOL.FindServiceByName(service_name)  # a KeyError too when it is no service
        if method not in service.methods_by_name:
            raise
        return service.file


def _put_files(response: pb.ServerReflectionResponse, file: FileDescriptor) -> None:
    """The file and everything it imports, directly or not: a client needs them all to
    build the file's descriptors."""
    files: dict[str, FileDescriptor] = {}
    waiting = [file]
    while waiting:
        current = waiting.pop()
        if current.name not in files:
            files[current.name] = current
            waiting.extend(current.dependencies)
    for each in files.values():
        proto = descriptor_pb2.FileDescriptorProto()
        each.CopyToProto(proto)
        response.file_descriptor_response.file_descriptor_proto.append(proto.SerializeToString())


def _put_error(response: pb.ServerReflectionResponse, code: StatusCode, message: str) -> None:
    response.error_response.error_code = int(code)
    response.error_response.error_message = message


def reflection_methods(servicer: ReflectionServicer) -> dict[str, RpcMethod]:
    methods = methods_from_descriptor(pb.DESCRIPTOR.services_by_name["ServerReflection"], pb, servicer)
    for path, method in list(methods.items()):
        alias = path.replace(REFLECTION_SERVICE_NAME, _V1_SERVICE_NAME)
        methods[alias] = RpcMethod(
            alias, method.implementation, method.request_type, method.client_streaming, method.server_streaming
        )
    return methods
