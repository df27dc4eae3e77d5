"""The KServe v2 HTTP/REST protocol with Triton's extensions, as a starlette ASGI app on
an in-process `naiad.Server`.

Handlers only parse, route and await: every decision (validation, status codes) comes
from the core, errors become Triton's `{"error": "..."}` bodies with the status of
`errors.HTTP_STATUS`.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import zlib
from typing import Any, Awaitable, Callable

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...errors import HTTP_STATUS, ErrorCode, NaiadError
from ...server import Server
from .codec import decode_infer_request, decode_json, encode_infer_response

__all__ = ["create_app", "DEFAULT_MAX_INPUT_SIZE"]

log = logging.getLogger("naiad.http")

DEFAULT_MAX_INPUT_SIZE = 64 * 1024 * 1024
_JSON = "application/json"
_BINARY = "application/octet-stream"
_HEADER_LENGTH = "Inference-Header-Content-Length"

Handler = Callable[[Request], Awaitable[Response]]


def _json(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type=_JSON)


def _empty(status: int = 200) -> Response:
    return Response(b"", status_code=status, media_type=_JSON)


def _healthy() -> Response:
    # Triton answers the health endpoints with an empty text/plain body.
    return Response(b"", media_type="text/plain")


def error_response(error: NaiadError) -> Response:
    return _json({"error": error.message}, HTTP_STATUS.get(error.code, 500))


def _version(request: Request) -> str:
    return request.path_params.get("version", "")


class _Routes:
    """The endpoints; one instance per app, holding the server and the body limit."""

    def __init__(self, server: Server, max_input_size: int) -> None:
        self.server = server
        self.max_input_size = max_input_size

    async def body(self, request: Request) -> bytes:
        """The request body (decompressed when Content-Encoding says so), refused with 400
        once it passes --http-max-input-size."""
        limit = self.max_input_size
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise self._too_large(int(declared))
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise self._too_large(size)
            chunks.append(chunk)
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        encoding = request.headers.get("content-encoding", "").strip().lower()
        if encoding and encoding != "identity" and body:
            body = self._decompress(body, encoding)
        return body

    def _decompress(self, body: bytes, encoding: str) -> bytes:
        if encoding == "gzip":
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            decompressor = zlib.decompressobj()
        else:
            raise NaiadError.unsupported(f"unsupported Content-Encoding '{encoding}'; use gzip or deflate")
        try:
            result = decompressor.decompress(body, self.max_input_size + 1)
        except zlib.error as exc:
            raise NaiadError.invalid(f"the {encoding} request body does not decompress: {exc}") from None
        if len(result) > self.max_input_size:
            raise self._too_large(len(result), decompressed=True)
        return result

    def _too_large(self, size: int, decompressed: bool = False) -> NaiadError:
        what = "decompressed request body" if decompressed else "request body"
        return NaiadError.invalid(
            f"the {what} is larger than the {self.max_input_size} bytes --http-max-input-size allows "
            f"({size} bytes or more)"
        )

    async def json_body(self, request: Request, what: str) -> dict[str, Any]:
        body = await self.body(request)
        if not body.strip():
            return {}
        document = decode_json(body, what)
        if not isinstance(document, dict):
            raise NaiadError.invalid(f"the {what} body must be a JSON object")
        return document

    # -- health and metadata -------------------------------------------------------------

    async def live(self, request: Request) -> Response:
        if self.server.is_live():
            return _healthy()
        return _json({"error": "server is not live"}, 400)

    async def ready(self, request: Request) -> Response:
        if self.server.is_ready():
            return _healthy()
        return _json({"error": "server is not ready"}, 400)

    async def server_metadata(self, request: Request) -> Response:
        return _json(self.server.metadata())

    async def model_ready(self, request: Request) -> Response:
        name, version = request.path_params["model"], _version(request)
        if self.server.model_ready(name, version):
            return _healthy()
        which = f"model '{name}'" + (f" version {version}" if version else "")
        return _json({"error": f"{which} is not ready"}, 400)

    async def model_metadata(self, request: Request) -> Response:
        return _json(self.server.model_metadata(request.path_params["model"], _version(request)))

    async def model_config(self, request: Request) -> Response:
        config = self.server.model_config(request.path_params["model"], _version(request))
        return _json(config.to_json_dict())

    async def statistics(self, request: Request) -> Response:
        stats = self.server.statistics(request.path_params.get("model", ""), _version(request))
        return _json({"model_stats": stats})

    # -- inference -----------------------------------------------------------------------

    async def infer(self, request: Request) -> Response:
        body = await self.body(request)
        shared_memory = self.server.shared_memory
        inference, binary_output = decode_infer_request(
            body, request.headers.get(_HEADER_LENGTH), request.path_params["model"], _version(request), shared_memory
        )
        response = await _unless_disconnected(request, self.server.infer(inference))
        encoded = encode_infer_response(response, inference.outputs, binary_output, shared_memory)
        headers = {}
        media_type = _JSON
        if encoded.header_length is not None:
            headers[_HEADER_LENGTH] = str(encoded.header_length)
            media_type = _BINARY
        content = encoded.body
        accepted = request.headers.get("accept-encoding", "")
        if accepted:
            encoding = _response_encoding(accepted)
            if encoding == "gzip":
                content = gzip.compress(content, compresslevel=6)
            elif encoding == "deflate":
                content = zlib.compress(content)
            if encoding:
                headers["Content-Encoding"] = encoding
        return Response(content, headers=headers, media_type=media_type)

    # -- model repository ----------------------------------------------------------------

    async def repository_index(self, request: Request) -> Response:
        document = await self.json_body(request, "repository index request")
        ready = document.get("ready", False)
        if not isinstance(ready, bool):
            raise NaiadError.invalid(f"'ready' must be true or false, got {ready!r}")
        return _json(self.server.repository_index(ready))

    async def load(self, request: Request) -> Response:
        name = request.path_params["model"]
        document = await self.json_body(request, "model load request")
        parameters = document.get("parameters", {})
        if not isinstance(parameters, dict):
            raise NaiadError.invalid("'parameters' of the load request must be a JSON object")
        files = [key for key in parameters if key.startswith("file:")]
        if files:
            raise NaiadError.unsupported(
                f"loading model '{name}' with uploaded files ({', '.join(files)}) is not supported yet; "
                "put the files in the model repository and load the model by name"
            )
        config = None
        if "config" in parameters:
            text = parameters["config"]
            if isinstance(text, str):
                config = decode_json(text.encode("utf-8"), f"'config' parameter of the load request for model '{name}'")
            elif isinstance(text, dict):
                config = text
            if not isinstance(config, dict):
                raise NaiadError.invalid(
                    f"the 'config' parameter of the load request for model '{name}' must be a JSON object "
                    "(or a string holding one) in the model configuration's JSON form"
                )
        await self.server.load_model(name, config=config)
        return _empty()

    async def unload(self, request: Request) -> Response:
        name = request.path_params["model"]
        document = await self.json_body(request, "model unload request")
        parameters = document.get("parameters", {})
        if not isinstance(parameters, dict):
            raise NaiadError.invalid("'parameters' of the unload request must be a JSON object")
        if parameters.get("unload_dependents", False):
            raise NaiadError.unsupported(
                f"unloading model '{name}' with unload_dependents is not supported yet; unload each model by name"
            )
        await self.server.unload_model(name)
        return _empty()

    # -- system shared memory ------------------------------------------------------------

    async def shm_status(self, request: Request) -> Response:
        return _json(self.server.shared_memory.status(request.path_params.get("region")))

    async def shm_register(self, request: Request) -> Response:
        name = request.path_params["region"]
        document = await self.json_body(request, "shared memory register request")
        key = document.get("key")
        if not isinstance(key, str) or not key:
            raise NaiadError.invalid(f"registering shared memory region '{name}' needs a 'key' string")
        offset = document.get("offset", 0)
        byte_size = document.get("byte_size")
        for field, value in (("offset", offset), ("byte_size", byte_size)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise NaiadError.invalid(
                    f"registering shared memory region '{name}' needs an integer '{field}', got {value!r}"
                )
        self.server.shared_memory.register(name, key, offset, byte_size)
        return _empty()

    async def shm_unregister(self, request: Request) -> Response:
        self.server.shared_memory.unregister(request.path_params.get("region"))
        return _empty()

    # -- CUDA shared memory: this server has no CUDA support -----------------------------

    async def cuda_shm_status(self, request: Request) -> Response:
        region = request.path_params.get("region")
        if region is not None:
            raise NaiadError.not_found(f"unable to find CUDA shared memory region: '{region}'")
        return _json([])

    async def cuda_shm_register(self, request: Request) -> Response:
        raise NaiadError.unsupported(
            "CUDA shared memory is not supported by this server (it has no CUDA support); "
            "use system shared memory instead"
        )

    async def cuda_shm_unregister(self, request: Request) -> Response:
        return _empty()


async def _unless_disconnected(request: Request, inference: Awaitable[Any]) -> Any:
    """Await `inference`, cancelling it when the client disconnects first: the server
    then drops the request from its model's queue (Triton does the same)."""
    work = asyncio.ensure_future(inference)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((work, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not work.done():
        work.cancel()
        raise NaiadError.cancelled_request()
    return work.result()


async def _disconnected(request: Request) -> None:
    # The body is read: what the server sends next is the disconnect, if it comes.
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _response_encoding(accepted: str) -> str:
    """gzip or deflate when the client accepts one (tritonclient's response compression)."""
    names = {part.split(";")[0].strip().lower() for part in accepted.split(",")}
    for encoding in ("gzip", "deflate"):
        if encoding in names:
            return encoding
    return ""


def _guarded(handler: Handler) -> Handler:
    """Turn NaiadError into its JSON error body; anything else is a 500 naming it."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except NaiadError as error:
            return error_response(error)
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the server down
            log.exception("unexpected error answering %s %s", request.method, request.url.path)
            return error_response(NaiadError(ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"))

    return endpoint


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _json({"error": exc.detail}, exc.status_code)


def create_app(server: Server, max_input_size: int = DEFAULT_MAX_INPUT_SIZE) -> Starlette:
    """The ASGI app serving `server`; bodies over `max_input_size` bytes get 400."""
    r = _Routes(server, max_input_size)
    model = "/v2/models/{model}"
    versioned = "/v2/models/{model}/versions/{version:int}"
    get, post = ["GET"], ["POST"]
    table: list[tuple[str, Handler, list[str]]] = [
        ("/v2/health/live", r.live, get),
        ("/v2/health/ready", r.ready, get),
        ("/v2", r.server_metadata, get),
        # Before "/v2/models/{model}": a model named "stats" is shadowed, as in Triton.
        ("/v2/models/stats", r.statistics, get),
        (model, r.model_metadata, get),
        (versioned, r.model_metadata, get),
        (model + "/ready", r.model_ready, get),
        (versioned + "/ready", r.model_ready, get),
        (model + "/config", r.model_config, get),
        (versioned + "/config", r.model_config, get),
        (model + "/stats", r.statistics, get),
        (versioned + "/stats", r.statistics, get),
        (model + "/infer", r.infer, post),
        (versioned + "/infer", r.infer, post),
        ("/v2/repository/index", r.repository_index, post),
        ("/v2/repository/models/{model}/load", r.load, post),
        ("/v2/repository/models/{model}/unload", r.unload, post),
        ("/v2/systemsharedmemory/status", r.shm_status, get),
        ("/v2/systemsharedmemory/region/{region}/status", r.shm_status, get),
        ("/v2/systemsharedmemory/region/{region}/register", r.shm_register, post),
        ("/v2/systemsharedmemory/region/{region}/unregister", r.shm_unregister, post),
        ("/v2/systemsharedmemory/unregister", r.shm_unregister, post),
        ("/v2/cudasharedmemory/status", r.cuda_shm_status, get),
        ("/v2/cudasharedmemory/region/{region}/status", r.cuda_shm_status, get),
        ("/v2/cudasharedmemory/region/{region}/register", r.cuda_shm_register, post),
        ("/v2/cudasharedmemory/region/{region}/unregister", r.cuda_shm_unregister, post),
        ("/v2/cudasharedmemory/unregister", r.cuda_shm_unregister, post),
    ]
    routes = [Route(path, _guarded(handler), methods=methods) for path, handler, methods in table]
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_exception})
