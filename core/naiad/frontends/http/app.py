"""The KServe v2 HTTP/REST protocol with Triton's extensions, as an ASGI app on an
in-process `naiad.Server`: starlette routes for every endpoint, with infer requests
answered by the fast path in `infer_endpoint.py`.

Handlers only parse, route and await: every decision (validation, status codes) comes
from the core; errors become Triton's `{"error": "..."}` bodies (see responses.py).
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from ...errors import NaiadError
from ...server import Server
from ..kserve.repository_requests import FILE_PREFIX, index_request, load_request, unload_request
from ..kserve.restrictions import Restriction
from ..kserve.shared_memory_requests import cuda_register_request, region_selector, register_request
from ..options import MAX_INPUT_SIZE
from .api_docs import ApiDocs
from .body import BodyReader
from .codec import decode_json
from .duplicate_keys import check_unique_keys
from .generate_endpoint import GenerateEndpoint
from .infer_endpoint import HEADER_LENGTH, InferEndpoint, NaiadHttpApp
from .responses import empty_response, error_for, forbidden, health_response, json_response
from .status_page import StatusPage

__all__ = ["create_app"]

Handler = Callable[[Request], Awaitable[Response]]


def _version(request: Request) -> str:
    # The route converts the version to int; the core takes the text ("" for the default).
    version = request.path_params.get("version")
    return "" if version is None else str(version)


class _Routes:
    """The endpoints; one instance per app."""

    def __init__(self, server: Server, body: BodyReader, infer_endpoint: InferEndpoint) -> None:
        self.server = server
        self.body_reader = body
        self.infer_endpoint = infer_endpoint
        self.generate_endpoint = GenerateEndpoint(server)

    async def body(self, request: Request) -> bytes:
        headers = request.headers
        return await self.body_reader.read(
            request.receive, headers.get("content-length"), headers.get("content-encoding")
        )

    async def json_body(self, request: Request, what: str, unique_keys: bool = False) -> dict[str, Any]:
        body = await self.body(request)
        if not body.strip():
            return {}
        document = decode_json(body, f"the {what} body")
        if not isinstance(document, dict):
            raise NaiadError.invalid(f"the {what} body must be a JSON object")
        if unique_keys:
            check_unique_keys(body, f"the {what} body")
        return document

    # -- health and metadata -------------------------------------------------------------

    async def live(self, request: Request) -> Response:
        if self.server.is_live():
            return health_response()
        return json_response({"error": "server is not live"}, 400)

    async def ready(self, request: Request) -> Response:
        if self.server.is_ready():
            return health_response()
        return json_response({"error": "server is not ready"}, 400)

    async def server_metadata(self, request: Request) -> Response:
        return json_response(self.server.metadata())

    async def model_ready(self, request: Request) -> Response:
        name, version = request.path_params["model"], _version(request)
        if self.server.model_ready(name, version):
            return health_response()
        which = f"model '{name}'" + (f" version {version}" if version else "")
        return json_response({"error": f"{which} is not ready"}, 400)

    async def model_metadata(self, request: Request) -> Response:
        return json_response(self.server.model_metadata(request.path_params["model"], _version(request)))

    async def model_config(self, request: Request) -> Response:
        config = self.server.model_config(request.path_params["model"], _version(request))
        return json_response(config.to_json_dict())

    async def statistics(self, request: Request) -> Response:
        stats = self.server.statistics(request.path_params.get("model", ""), _version(request))
        return json_response({"model_stats": stats})

    # -- inference (requests normally take the fast path in infer_endpoint.py) ---------------

    async def infer(self, request: Request) -> Response:
        headers = request.headers
        content, extra, media_type = await self.infer_endpoint.answer(
            request.path_params["model"],
            _version(request),
            await self.body(request),
            headers.get(HEADER_LENGTH),
            headers.get("accept-encoding"),
            request.receive,
            headers.raw,
        )
        return Response(content, headers=extra, media_type=media_type)

    async def generate(self, request: Request) -> Response:
        document = await self.json_body(request, "generate request", unique_keys=True)
        return await self.generate_endpoint.generate(request.path_params["model"], _version(request), document)

    async def generate_stream(self, request: Request) -> Response:
        document = await self.json_body(request, "generate request", unique_keys=True)
        return await self.generate_endpoint.generate_stream(request.path_params["model"], _version(request), document)

    # -- model repository ----------------------------------------------------------------

    # -- logging and trace extensions -----------------------------------------------------

    async def logging(self, request: Request) -> Response:
        settings = self.server.log_settings
        if request.method == "GET":
            return json_response(settings.get())
        changes = await self.json_body(request, "log settings")
        # In a thread, as every change other workers must take too (worker_server.replicate).
        return json_response(await asyncio.to_thread(settings.update, changes))

    async def trace_setting(self, request: Request) -> Response:
        model = request.path_params.get("model", "")
        if model:
            self.server.check_trace_model(model)
        tracing = self.server.tracing
        if request.method == "GET":
            return json_response(tracing.get(model))
        return json_response(await tracing.change(await self.json_body(request, "trace settings"), model))

    async def repository_index(self, request: Request) -> Response:
        document = await self.json_body(request, "repository index request")
        index = index_request(document.get("ready", False))
        # Triton's JSON leaves out the reason of a row that has none.
        rows = [
            {key: value for key, value in row.items() if key != "reason" or value}
            for row in self.server.repository_index(index.ready)
        ]
        return json_response(rows)

    async def repository_parameters(self, request: Request, action: str) -> dict[str, Any]:
        """The `parameters` object of a load or unload request body."""
        document = await self.json_body(request, f"model {action} request")
        parameters = document.get("parameters", {})
        if not isinstance(parameters, dict):
            raise NaiadError.invalid(f"'parameters' of the {action} request must be a JSON object")
        return parameters

    async def load(self, request: Request) -> Response:
        name = request.path_params["model"]
        self.server.check_repository_control()
        parameters = await self.repository_parameters(request, "load")
        for key, value in parameters.items():
            if key.startswith(FILE_PREFIX):
                # JSON carries a file's bytes in base64.
                try:
                    parameters[key] = base64.b64decode(value, validate=True)
                except (TypeError, ValueError):
                    raise NaiadError.invalid(
                        f"failed to load '{name}': parameter '{key}' must hold the file's content in base64"
                    ) from None
        load = load_request(name, parameters)
        await self.server.load_model(load.model, config=load.config, files=dict(load.files))
        return empty_response()

    async def unload(self, request: Request) -> Response:
        name = request.path_params["model"]
        self.server.check_repository_control()
        unload = unload_request(name, await self.repository_parameters(request, "unload"))
        await self.server.unload_model(unload.model, unload_dependents=unload.unload_dependents)
        return empty_response()

    # -- system shared memory ------------------------------------------------------------

    async def shm_status(self, request: Request) -> Response:
        return json_response(self.server.shared_memory.status(region_selector(request.path_params.get("region"))))

    async def shm_register(self, request: Request) -> Response:
        document = await self.json_body(request, "shared memory register request")
        region = register_request(
            request.path_params["region"], document.get("key"), document.get("offset", 0), document.get("byte_size")
        )
        # In a thread: with several workers, the others map the region before this answers,
        # and one that does not answer (a stopped process) must not hold this event loop.
        shared_memory = self.server.shared_memory
        await asyncio.to_thread(shared_memory.register, region.name, region.key, region.offset, region.byte_size)
        return empty_response()

    async def shm_unregister(self, request: Request) -> Response:
        name = region_selector(request.path_params.get("region"))
        await asyncio.to_thread(self.server.shared_memory.unregister, name)
        return empty_response()

    # -- CUDA shared memory --------------------------------------------------------------

    async def cuda_shm_status(self, request: Request) -> Response:
        return json_response(self.server.shared_memory.cuda_status(region_selector(request.path_params.get("region"))))

    async def cuda_shm_register(self, request: Request) -> Response:
        name = request.path_params["region"]
        shared_memory = self.server.shared_memory
        shared_memory.check_client_allowed()
        # A server without CUDA refuses before reading the body, as Triton built without GPUs.
        await asyncio.to_thread(shared_memory.cuda.runtime, name)
        document = await self.json_body(request, "cuda shared memory register request")
        handle = document.get("raw_handle")
        if not isinstance(handle, dict) or not isinstance(handle.get("b64"), str):
            raise NaiadError.invalid("Shared memory register request has no 'raw_handle' field with a 'b64' string")
        try:
            raw = base64.b64decode(handle["b64"], validate=True)
        except ValueError:
            raise NaiadError.invalid("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t") from None
        region = cuda_register_request(name, raw, document.get("device_id"), document.get("byte_size"))
        await asyncio.to_thread(
            shared_memory.register_cuda, region.name, region.raw_handle, region.device_id, region.byte_size
        )
        return empty_response()

    async def cuda_shm_unregister(self, request: Request) -> Response:
        name = region_selector(request.path_params.get("region"))
        await asyncio.to_thread(self.server.shared_memory.unregister_cuda, name)
        return empty_response()


def _guarded(handler: Handler, restriction: Restriction | None) -> Handler:
    """Refuse a request of a restricted group without its header (403, as Triton); turn
    NaiadError into its JSON error body; anything else is a 500 naming it."""

    async def endpoint(request: Request) -> Response:
        if restriction is not None and not restriction.allows(request.headers.items()):
            return forbidden(restriction)
        try:
            return await handler(request)
        except ClientDisconnect:
            # Nobody is left to answer; the response is dropped by the server.
            return empty_response(499)
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the server down
            return error_for(exc, request.scope)

    return endpoint


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return json_response({"error": exc.detail}, exc.status_code)


def create_app(
    server: Server,
    max_input_size: int = MAX_INPUT_SIZE,
    restrictions: Mapping[str, Restriction] | None = None,
    forward_headers: re.Pattern[str] | None = None,
) -> NaiadHttpApp:
    """The ASGI app serving `server`; bodies over `max_input_size` bytes get 400.
    `restrictions` ({group: restriction}, `--http-restricted-api`) close groups of endpoints
    to requests without their header; request headers matching `forward_headers` become
    inference request parameters."""
    restrictions = restrictions or {}
    body = BodyReader(max_input_size)
    r = _Routes(server, body, InferEndpoint(server, body, restrictions.get("inference"), forward_headers))
    page, docs = StatusPage(server), ApiDocs()
    model = "/v2/models/{model}"
    versioned = "/v2/models/{model}/versions/{version:int}"
    get, post = ["GET"], ["POST"]
    # Path, handler, methods, and the restricted group (frontends.kserve.restrictions.GROUPS) it
    # is in ("": none; a browser cannot send a header when it opens a page).
    table: list[tuple[str, Handler, list[str], str]] = [
        ("/v2/health/live", r.live, get, "health"),
        ("/v2/health/ready", r.ready, get, "health"),
        ("/v2", r.server_metadata, get, "metadata"),
        # Before "/v2/models/{model}": a model named "stats" is shadowed, as in Triton.
        ("/v2/models/stats", r.statistics, get, "statistics"),
        (model, r.model_metadata, get, "metadata"),
        (versioned, r.model_metadata, get, "metadata"),
        (model + "/ready", r.model_ready, get, "health"),
        (versioned + "/ready", r.model_ready, get, "health"),
        (model + "/config", r.model_config, get, "model-config"),
        (versioned + "/config", r.model_config, get, "model-config"),
        (model + "/stats", r.statistics, get, "statistics"),
        (versioned + "/stats", r.statistics, get, "statistics"),
        (model + "/infer", r.infer, post, "inference"),
        (versioned + "/infer", r.infer, post, "inference"),
        (model + "/generate", r.generate, post, "inference"),
        (versioned + "/generate", r.generate, post, "inference"),
        (model + "/generate_stream", r.generate_stream, post, "inference"),
        (versioned + "/generate_stream", r.generate_stream, post, "inference"),
        ("/v2/logging", r.logging, get + post, "logging"),
        ("/v2/trace/setting", r.trace_setting, get + post, "trace"),
        (model + "/trace/setting", r.trace_setting, get + post, "trace"),
        ("/v2/repository/index", r.repository_index, post, "model-repository"),
        ("/v2/repository/models/{model}/load", r.load, post, "model-repository"),
        ("/v2/repository/models/{model}/unload", r.unload, post, "model-repository"),
        ("/v2/systemsharedmemory/status", r.shm_status, get, "shared-memory"),
        ("/v2/systemsharedmemory/region/{region}/status", r.shm_status, get, "shared-memory"),
        ("/v2/systemsharedmemory/region/{region}/register", r.shm_register, post, "shared-memory"),
        ("/v2/systemsharedmemory/region/{region}/unregister", r.shm_unregister, post, "shared-memory"),
        ("/v2/systemsharedmemory/unregister", r.shm_unregister, post, "shared-memory"),
        ("/v2/cudasharedmemory/status", r.cuda_shm_status, get, "shared-memory"),
        ("/v2/cudasharedmemory/region/{region}/status", r.cuda_shm_status, get, "shared-memory"),
        ("/v2/cudasharedmemory/region/{region}/register", r.cuda_shm_register, post, "shared-memory"),
        ("/v2/cudasharedmemory/region/{region}/unregister", r.cuda_shm_unregister, post, "shared-memory"),
        ("/v2/cudasharedmemory/unregister", r.cuda_shm_unregister, post, "shared-memory"),
        # The status page and its figures (status_page.py), which are statistics.
        ("/", page.status_page, get, ""),
        ("/status", page.status, get, "statistics"),
        ("/status/{asset}", page.status_asset, get, ""),
        # This API described (openapi.py), and Swagger UI on the description.
        ("/v2/openapi.json", docs.openapi, get, ""),
        ("/v2/docs", docs.api_docs, get, ""),
        ("/v2/docs/{asset}", docs.api_docs_asset, get, ""),
    ]
    docs.describe((path, handler, methods) for path, handler, methods, _ in table)
    routes = [
        Route(path, _guarded(handler, restrictions.get(group)), methods=methods)
        for path, handler, methods, group in table
    ]
    return NaiadHttpApp(r.infer_endpoint, Starlette(routes=routes, exception_handlers={HTTPException: _http_exception}))
