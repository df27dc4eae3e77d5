"""`inference.GRPCInferenceService` on a `naiad.Server`.

Each RPC decodes with `codec`, calls the one `Server` method that does the work, and
encodes the answer; a `NaiadError` it raises becomes the gRPC status `errors.GRPC_STATUS_NAME`
names (in `rpc.Call`), with the error's message as the details tritonclient shows.
`rpc_methods` builds the method table from the proto's own service descriptor, so no
generated `_pb2_grpc` module is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ...errors import NaiadError
from ...inference import InferenceRequest, InferenceResponse
from ...protos import grpc_service_pb2 as pb
from ...server import Server
from ..kserve.infer_parameters import (
    EMPTY_FINAL_RESPONSE,
    check_reserved_parameters,
    forward_headers,
    take_empty_final_response,
)
from ..kserve.repository_requests import index_request, unload_request
from ..kserve.restrictions import Restriction
from ..kserve.shared_memory_requests import cuda_register_request, region_selector, register_request
from . import codec
from .restrictions import guard
from .rpc import RpcMethod
from .stream_outbox import Place, StreamOutbox

__all__ = ["SERVICE_NAME", "InferenceServicer", "rpc_methods", "methods_from_descriptor"]

log = logging.getLogger("naiad.grpc")

SERVICE_NAME = "inference.GRPCInferenceService"

# The response parameter that tells a streaming client a request is complete.
FINAL_FLAG = "triton_final_response"
# Requests one ModelStreamInfer call may have in flight. Past it the stream takes no more
# messages, so HTTP/2 flow control makes the client wait: one frame packed with thousands of
# small requests cannot start thousands of tasks at once and starve every other connection.
STREAM_IN_FLIGHT = 64
# The same for requests of sequences (those with a `sequence_id`), higher: a sequence waiting
# for a slot waits for other sequences' END requests, which may be further down this very
# stream, so a low bound would stall the stream until idle sequences were released. Triton
# reads a stream without a bound; this one still bounds what a client can make it hold.
STREAM_SEQUENCE_IN_FLIGHT = 4096
# The one `triton_` parameter a client sends (tritonclient's enable_empty_final_response).
_CLIENT_TRITON_PARAMETERS = frozenset({EMPTY_FINAL_RESPONSE})


class InferenceServicer:
    """One method per RPC of `inference.GRPCInferenceService`."""

    def __init__(self, server: Server, forward_headers: re.Pattern[str] | None = None) -> None:
        self.server = server
        # --grpc-header-forward-pattern: matching request headers become request parameters.
        self.forward_headers = forward_headers

    # -- health and metadata ---------------------------------------------------------------

    async def ServerLive(self, request: pb.ServerLiveRequest, context: Any) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=self.server.is_live())

    async def ServerReady(self, request: pb.ServerReadyRequest, context: Any) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=self.server.is_ready())

    async def ModelReady(self, request: pb.ModelReadyRequest, context: Any) -> pb.ModelReadyResponse:
        try:
            ready = self.server.model(request.name, request.version).is_ready()
        except NaiadError as exc:
            if exc.code.name == "INVALID_ARG":  # a malformed version is the client's error
                raise
            ready = False
        return pb.ModelReadyResponse(ready=ready)

    async def ServerMetadata(self, request: pb.ServerMetadataRequest, context: Any) -> pb.ServerMetadataResponse:
        metadata = self.server.metadata()
        return pb.ServerMetadataResponse(
            name=metadata["name"], version=metadata["version"], extensions=metadata["extensions"]
        )

    async def ModelMetadata(self, request: pb.ModelMetadataRequest, context: Any) -> pb.ModelMetadataResponse:
        return codec.model_metadata_response(self.server.model_metadata(request.name, request.version))

    async def ModelConfig(self, request: pb.ModelConfigRequest, context: Any) -> pb.ModelConfigResponse:
        config = self.server.model_config(request.name, request.version)
        response = pb.ModelConfigResponse()
        response.config.CopyFrom(config.proto)
        return response

    async def ModelStatistics(self, request: pb.ModelStatisticsRequest, context: Any) -> pb.ModelStatisticsResponse:
        return codec.statistics_response(self.server.statistics(request.name, request.version))

    # -- inference -------------------------------------------------------------------------

    def _decode(
        self, message: pb.ModelInferRequest, context: Any, in_place: list[memoryview] | None
    ) -> InferenceRequest:
        request = codec.decode_infer_request(message, self.server.shared_memory, in_place)
        check_reserved_parameters(request.parameters, _CLIENT_TRITON_PARAMETERS)
        if self.forward_headers is not None:
            # Binary (-bin) metadata values are bytes: only text ones are forwarded.
            metadata = context.invocation_metadata() or ()
            forward_headers(
                request.parameters,
                self.forward_headers,
                ((key, value) for key, value in metadata if isinstance(value, str)),
            )
        if request.outputs:
            codec.check_output_placements(request, self.server.shared_memory)
        return request

    async def ModelInfer(self, message: pb.ModelInferRequest, context: Any) -> pb.ModelInferResponse:
        request = self._decode(message, context, _taken_in_place(context))
        if self.server.model(request.model_name, request.model_version).config.decoupled:
            # As Triton: a decoupled model may answer with any number of responses, which
            # one unary reply cannot carry.
            raise NaiadError.unsupported(
                f"ModelInfer RPC doesn't support models with decoupled transaction policy (model "
                f"'{request.model_name}'); use ModelStreamInfer"
            )
        response = await self.server.infer(request)
        return codec.encode_infer_response(response, request, self.server.shared_memory)

    async def ModelStreamInfer(
        self, requests: AsyncIterator[pb.ModelInferRequest], context: Any
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        """Requests run concurrently (up to STREAM_IN_FLIGHT at a time, and apart from those
        STREAM_SEQUENCE_IN_FLIGHT requests of sequences) and reach their
        schedulers in the order they arrive, so a sequence's requests keep their order; the
        answers of models that are not decoupled come back in request order too
        (`StreamOutbox`). The stream stays open until the client closes it."""
        outbox: StreamOutbox[pb.ModelStreamInferResponse] = StreamOutbox()
        running: set[asyncio.Task[None]] = set()
        others: set[asyncio.Task[None]] = set()
        of_sequences: set[asyncio.Task[None]] = set()

        async def read_all() -> None:
            try:
                async for message in requests:
                    # The task runs to its scheduler's enqueue before it first waits, and
                    # tasks start in creation order: arrival order is enqueue order.
                    in_place = _taken_in_place(context)
                    task = asyncio.create_task(self._stream_one(message, in_place, context, outbox, outbox.reserve()))
                    sequence = "sequence_id" in message.parameters
                    group, bound = (of_sequences, STREAM_SEQUENCE_IN_FLIGHT) if sequence else (others, STREAM_IN_FLIGHT)
                    for tasks in (running, group):
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                    if len(group) >= bound:
                        await asyncio.wait(list(group), return_when=asyncio.FIRST_COMPLETED)
                while running:
                    await asyncio.gather(*list(running), return_exceptions=True)
            finally:
                outbox.close()

        reader = asyncio.create_task(read_all())
        try:
            while (item := await outbox.get()) is not None:
                yield item
            await reader  # surfaces a failed read (the RPC then ends with its status)
        finally:
            reader.cancel()
            for task in list(running):
                task.cancel()

    async def _stream_one(
        self,
        message: pb.ModelInferRequest,
        in_place: list[memoryview] | None,
        context: Any,
        outbox: StreamOutbox[pb.ModelStreamInferResponse],
        place: Place[pb.ModelStreamInferResponse],
    ) -> None:
        answers: list[pb.ModelStreamInferResponse] = []
        try:
            request = self._decode(message, context, in_place)
            empty_final = take_empty_final_response(request.parameters)
            if self.server.model(request.model_name, request.model_version).config.decoupled:
                outbox.fill(place, [])  # its responses leave as they come
                # aclosing: a cancelled stream closes the generator now, which tells the
                # model the request was cancelled, instead of whenever it is collected.
                async with contextlib.aclosing(self.server.infer_stream(request)) as responses:
                    async for response in responses:
                        for answer in self._stream_answers(response, request, empty_final):
                            outbox.send_now(answer)
            else:
                response = await self.server.infer(request)
                answers = self._stream_answers(response, request, empty_final)
        except NaiadError as exc:
            answers = [codec.stream_error(exc, message.id)]
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            log.exception("streamed request for model '%s' failed", message.model_name)
            answers = [codec.stream_error(NaiadError.unexpected(exc), message.id)]
        if place.filled:
            for answer in answers:
                outbox.send_now(answer)
        else:
            outbox.fill(place, answers)
        await place.wait_sent()

    def _stream_answers(
        self, response: InferenceResponse, request: InferenceRequest, empty_final: bool
    ) -> list[pb.ModelStreamInferResponse]:
        """What the client gets for one response: nothing, the response, or an error."""
        if response.error is not None:
            return [codec.stream_error(response.error, request.id)]
        # A final response with nothing in it only closes the request; Triton sends it to
        # clients that asked for it and drops it otherwise.
        if response.final and not response.outputs and not empty_final:
            return []
        try:
            encoded = codec.encode_infer_response(response, request, self.server.shared_memory)
        except NaiadError as exc:
            return [codec.stream_error(exc, request.id)]
        encoded.id = request.id
        if not encoded.model_name:
            encoded.model_name = request.model_name
        encoded.parameters[FINAL_FLAG].bool_param = response.final
        return [pb.ModelStreamInferResponse(infer_response=encoded)]

    # -- model repository ------------------------------------------------------------------

    async def RepositoryIndex(self, request: pb.RepositoryIndexRequest, context: Any) -> pb.RepositoryIndexResponse:
        index = index_request(request.ready)
        return codec.repository_index_response(self.server.repository_index(index.ready))

    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: Any
    ) -> pb.RepositoryModelLoadResponse:
        self.server.check_repository_control()
        load = codec.load_request(request.model_name, request.parameters)
        await self.server.load_model(load.model, load.config, dict(load.files))
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: Any
    ) -> pb.RepositoryModelUnloadResponse:
        self.server.check_repository_control()
        # A value that is not a bool_param reads as false, as before the parameters were shared.
        dependents = request.parameters.get("unload_dependents")
        unload = unload_request(
            request.model_name, {"unload_dependents": dependents is not None and dependents.bool_param}
        )
        await self.server.unload_model(unload.model, unload.unload_dependents)
        return pb.RepositoryModelUnloadResponse()

    # -- shared memory ---------------------------------------------------------------------

    async def SystemSharedMemoryStatus(
        self, request: pb.SystemSharedMemoryStatusRequest, context: Any
    ) -> pb.SystemSharedMemoryStatusResponse:
        regions = self.server.shared_memory.status(region_selector(request.name))
        return codec.system_shared_memory_status_response(regions)

    async def SystemSharedMemoryRegister(
        self, request: pb.SystemSharedMemoryRegisterRequest, context: Any
    ) -> pb.SystemSharedMemoryRegisterResponse:
        region = register_request(request.name, request.key, request.offset, request.byte_size)
        # In a thread, as the HTTP frontend does (the other workers map the region first).
        shared_memory = self.server.shared_memory
        await asyncio.to_thread(shared_memory.register, region.name, region.key, region.offset, region.byte_size)
        return pb.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(
        self, request: pb.SystemSharedMemoryUnregisterRequest, context: Any
    ) -> pb.SystemSharedMemoryUnregisterResponse:
        await asyncio.to_thread(self.server.shared_memory.unregister, region_selector(request.name))
        return pb.SystemSharedMemoryUnregisterResponse()

    async def CudaSharedMemoryStatus(
        self, request: pb.CudaSharedMemoryStatusRequest, context: Any
    ) -> pb.CudaSharedMemoryStatusResponse:
        regions = self.server.shared_memory.cuda_status(region_selector(request.name))
        return codec.cuda_shared_memory_status_response(regions)

    async def CudaSharedMemoryRegister(
        self, request: pb.CudaSharedMemoryRegisterRequest, context: Any
    ) -> pb.CudaSharedMemoryRegisterResponse:
        region = cuda_register_request(request.name, request.raw_handle, request.device_id, request.byte_size)
        await asyncio.to_thread(
            self.server.shared_memory.register_cuda,
            region.name,
            region.raw_handle,
            region.device_id,
            region.byte_size,
        )
        return pb.CudaSharedMemoryRegisterResponse()

    async def CudaSharedMemoryUnregister(
        self, request: pb.CudaSharedMemoryUnregisterRequest, context: Any
    ) -> pb.CudaSharedMemoryUnregisterResponse:
        # A name no region has is no error, as in Triton (clients unregister everything when
        # they clean up).
        await asyncio.to_thread(self.server.shared_memory.unregister_cuda, region_selector(request.name))
        return pb.CudaSharedMemoryUnregisterResponse()

    # -- trace and log settings ------------------------------------------------------------

    async def TraceSetting(self, request: pb.TraceSettingRequest, context: Any) -> pb.TraceSettingResponse:
        if request.model_name:
            self.server.check_trace_model(request.model_name)
        updates = {key: list(value.value) for key, value in request.settings.items()}
        tracing = self.server.tracing
        settings = await tracing.change(updates, request.model_name) if updates else tracing.get(request.model_name)
        response = pb.TraceSettingResponse()
        for key, current in settings.items():
            values = current if isinstance(current, list) else [current]
            response.settings[key].value.extend(str(v) for v in values)
        return response

    async def LogSettings(self, request: pb.LogSettingsRequest, context: Any) -> pb.LogSettingsResponse:
        updates: dict[str, Any] = {}
        for key, value in request.settings.items():
            choice = value.WhichOneof("parameter_choice")
            updates[key] = getattr(value, choice) if choice else None
        log_settings = self.server.log_settings
        settings = await asyncio.to_thread(log_settings.update, updates) if updates else log_settings.get()
        response = pb.LogSettingsResponse()
        for key, current in settings.items():
            if isinstance(current, bool):
                response.settings[key].bool_param = current
            elif isinstance(current, int):
                response.settings[key].uint32_param = current
            else:
                response.settings[key].string_param = str(current)
        return response


def _taken_in_place(context: Any) -> list[memoryview] | None:
    """The message read last's tensors, when naiad's transport read them in place (rpc.py);
    taken from the call, so that a stream's next message cannot be given them too. A
    grpc.aio-shaped context of another transport reads nothing in place."""
    in_place: list[memoryview] | None = getattr(context, "in_place", None)
    if in_place is not None:
        context.in_place = None
    return in_place


def rpc_methods(
    servicer: InferenceServicer, restrictions: Mapping[str, Restriction] | None = None
) -> dict[str, RpcMethod]:
    """Every method of the service by its path, built from the proto's descriptor so the
    method names, streaming kinds and message types cannot drift from the .proto."""
    service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    # An image or any large tensor arrives in raw_input_contents: read it where it landed.
    in_place = {"ModelInfer": "raw_input_contents", "ModelStreamInfer": "raw_input_contents"}
    return methods_from_descriptor(service, pb, servicer, restrictions, in_place)


def methods_from_descriptor(
    service: Any,
    module: Any,
    servicer: object,
    restrictions: Mapping[str, Restriction] | None = None,
    in_place: Mapping[str, str] | None = None,
) -> dict[str, RpcMethod]:
    """`in_place`: method name -> the bytes field of its request read in place (RpcMethod)."""
    methods: dict[str, RpcMethod] = {}
    for method in service.methods:
        implementation = getattr(servicer, method.name)
        if restrictions and method.name in restrictions:
            implementation = guard(implementation, restrictions[method.name])
        path = f"/{service.full_name}/{method.name}"
        methods[path] = RpcMethod(
            path,
            implementation,
            getattr(module, method.input_type.name),
            client_streaming=method.client_streaming,
            server_streaming=method.server_streaming,
            in_place_field=method.input_type.fields_by_name[in_place[method.name]].number
            if in_place and method.name in in_place
            else 0,
        )
    return methods
