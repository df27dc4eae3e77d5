"""The KServe v2 HTTP/REST protocol with Triton's extensions, as a starlette ASGI app on
an in-process `naiad.Server`.

Handlers only parse, route and await: every decision (validation, status codes) comes
from the core, errors become Triton's `{"error": "..."}` bodies with the status of
`errors.HTTP_STATUS`.
"""

from __future__ import annotations

import gzip
import logging
import zlib
from typing import Any, Awaitable, Callable

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ...errors import HTTP_STATUS, ErrorCode, NaiadError
from ...server import Server
from .codec import decode_infer_request, decode_json, decode_raw_request, encode_infer_response, is_raw_request

__all__ = ["create_app", "NaiadHttpApp", "DEFAULT_MAX_INPUT_SIZE"]

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
    # The route converts the version to int; the core takes the text ("" for the default).
    version = request.path_params.get("version")
    return "" if version is None else str(version)


class _Routes:
    """The endpoints; one instance per app, holding the server and the body limit."""

    def __init__(self, server: Server, max_input_size: int) -> None:
        self.server = server
        self.max_input_size = max_input_size

    async def body(self, request: Request) -> bytes:
        """The request body (decompressed when Content-Encoding says so), refused with 400
        once it passes --http-max-input-size."""
        headers = request.headers
        return await self.read_body(request.receive, headers.get("content-length"), headers.get("content-encoding"))

    async def read_body(self, receive: Receive, content_length: str | None, content_encoding: str | None) -> bytes:
        limit = self.max_input_size
        if content_length is not None and content_length.isdigit() and int(content_length) > limit:
            raise self._too_large(int(content_length))
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > limit:
                    raise self._too_large(size)
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        encoding = (content_encoding or "").strip().lower()
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
        document = decode_json(body, f"the {what} body")
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
        headers = request.headers
        body = await self.body(request)
        content, extra, media_type = await self.answer_infer(
            request.path_params["model"], _version(request), body,
            headers.get(_HEADER_LENGTH), headers.get("accept-encoding"),
        )
        return Response(content, headers=extra, media_type=media_type)

    async def answer_infer(
        self, name: str, version: str, body: bytes, header_length: str | None, accept_encoding: str | None
    ) -> tuple[bytes, dict[str, str], str]:
        """Body, extra headers and media type of the answer to one infer body."""
        shared_memory = self.server.shared_memory
        if is_raw_request(header_length):
            inference = decode_raw_request(body, self.server.model_config(name, version), version)
            binary_output = True
        else:
            inference, binary_output = decode_infer_request(body, header_length, name, version, shared_memory)
        response = await self.server.infer(inference)
        encoded = encode_infer_response(response, inference.outputs, binary_output, shared_memory)
        headers: dict[str, str] = {}
        media_type = _JSON
        if encoded.header_length is not None:
            headers[_HEADER_LENGTH] = str(encoded.header_length)
            media_type = _BINARY
        content = encoded.body
        if accept_encoding:
            encoding = _response_encoding(accept_encoding)
            if encoding == "gzip":
                content = gzip.compress(content, compresslevel=6)
            elif encoding == "deflate":
                content = zlib.compress(content)
            if encoding:
                headers["Content-Encoding"] = encoding
        return content, headers, media_type

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
                config = decode_json(text.encode("utf-8"), f"the 'config' parameter of the load request for model '{name}'")
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


def _response_encoding(accepted: str) -> str:
    """gzip or deflate when the client accepts one (tritonclient's response compression)."""
    names = {part.split(";")[0].strip().lower() for part in accepted.split(",")}
    for encoding in ("gzip", "deflate"):
        if encoding in names:
            return encoding
    return ""


def _error_for(exc: Exception, scope: Scope) -> Response:
    """The JSON error answer for an exception; anything but NaiadError is a 500 naming it."""
    if isinstance(exc, NaiadError):
        return error_response(exc)
    log.error("unexpected error answering %s %s", scope.get("method"), scope.get("path"), exc_info=exc)
    return error_response(NaiadError(ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"))


def _guarded(handler: Handler) -> Handler:
    """Turn NaiadError into its JSON error body; anything else is a 500 naming it."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except ClientDisconnect:
            # Nobody is left to answer; the response is dropped by the server.
            return _empty(499)
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the server down
            return _error_for(exc, request.scope)

    return endpoint


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _json({"error": exc.detail}, exc.status_code)


class NaiadHttpApp:
    """The ASGI app: `POST .../infer`, the hot path, is answered here without starlette's
    routing and request objects; every other request goes to the starlette app."""

    def __init__(self, routes: _Routes, app: Starlette) -> None:
        self._routes = routes
        self.app = app

    @property
    def routes(self) -> list[Any]:
        return self.app.routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            target = _infer_target(scope["path"])
            if target is not None:
                await self._infer(scope, receive, send, *target)
                return
        await self.app(scope, receive, send)

    async def _infer(self, scope: Scope, receive: Receive, send: Send, name: str, version: str) -> None:
        wanted = {b"content-length": None, b"content-encoding": None, b"accept-encoding": None,
                  b"inference-header-content-length": None}
        for key, value in scope["headers"]:
            if key in wanted:
                wanted[key] = value.decode("latin-1")
        routes = self._routes
        try:
            body = await routes.read_body(receive, wanted[b"content-length"], wanted[b"content-encoding"])
            content, extra, media_type = await routes.answer_infer(
                name, version, body, wanted[b"inference-header-content-length"], wanted[b"accept-encoding"]
            )
            status = 200
        except ClientDisconnect:
            return
        except Exception as exc:  # noqa: BLE001 - answered like every other endpoint
            response = _error_for(exc, scope)
            await response(scope, receive, send)
            return
        headers = [(b"content-type", media_type.encode()), (b"content-length", str(len(content)).encode())]
        headers += [(key.encode("latin-1"), value.encode("latin-1")) for key, value in extra.items()]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})


_MODELS_PREFIX = "/v2/models/"
_INFER_SUFFIX = "/infer"


def _infer_target(path: str) -> tuple[str, str] | None:
    """(model, version) of an infer path, as the starlette routes would match it."""
    if not path.startswith(_MODELS_PREFIX) or not path.endswith(_INFER_SUFFIX):
        return None
    middle = path[len(_MODELS_PREFIX) : -len(_INFER_SUFFIX)]
    if not middle:
        return None
    if "/" not in middle:
        return middle, ""
    name, _, version = middle.partition("/versions/")
    if name and "/" not in name and version.isdigit() and version.isascii():
        return name, str(int(version))
    return None


def create_app(server: Server, max_input_size: int = DEFAULT_MAX_INPUT_SIZE) -> NaiadHttpApp:
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
    return NaiadHttpApp(r, Starlette(routes=routes, exception_handlers={HTTPException: _http_exception}))
