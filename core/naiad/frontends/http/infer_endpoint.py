"""`POST /v2/models/{m}[/versions/{v}]/infer`, the hot path.

`NaiadHttpApp` answers it straight off the ASGI channel, without starlette's routing and
request objects (measured in-process: 134 -> 101 us per small JSON request); every other
request goes on to the starlette app.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from ...errors import NaiadError
from ...inference import InferenceResponse
from ...server import Server
from ..kserve.infer_parameters import forward_headers
from ..kserve.restrictions import Restriction
from .body import BodyReader
from .codec import decode_infer_request, decode_raw_request, encode_infer_response, is_raw_request
from .responses import BINARY, JSON, compress, error_for, forbidden

__all__ = ["InferEndpoint", "NaiadHttpApp", "infer_target", "HEADER_LENGTH"]

HEADER_LENGTH = "Inference-Header-Content-Length"
_MODELS_PREFIX = "/v2/models/"
_INFER_SUFFIX = "/infer"


class InferEndpoint:
    """Decodes an infer body, runs it on the server, encodes the answer."""

    def __init__(
        self,
        server: Server,
        body: BodyReader,
        restriction: Restriction | None = None,
        forward_headers: re.Pattern[str] | None = None,
    ) -> None:
        self.server = server
        self.body = body
        # --http-restricted-api inference:...: only requests with this header may infer
        # (checked by whoever reads the headers: NaiadHttpApp, the starlette route).
        self.restriction = restriction
        # --http-header-forward-pattern: matching request headers become request parameters.
        self.forward_headers = forward_headers

    async def answer(
        self,
        name: str,
        version: str,
        body: bytes,
        header_length: str | None,
        accept_encoding: str | None,
        receive: Receive | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> tuple[bytes, dict[str, str], str]:
        """Body, extra headers and media type of the answer to one infer body. With the
        ASGI `receive` channel, a client that disconnects first cancels the inference."""
        shared_memory = self.server.shared_memory
        if is_raw_request(header_length):
            inference = decode_raw_request(body, self.server.model_config(name, version), version)
            binary_output = True
        else:
            inference, binary_output = decode_infer_request(body, header_length, name, version, shared_memory)
        if self.forward_headers is not None:
            forward_headers(inference.parameters, self.forward_headers, _decoded(headers))
        work = self.server.infer(inference)
        response = await (work if receive is None else _unless_disconnected(receive, work))
        encoded = encode_infer_response(response, inference.outputs, binary_output, shared_memory)
        extra: dict[str, str] = {}
        media_type = JSON
        if encoded.header_length is not None:
            extra[HEADER_LENGTH] = str(encoded.header_length)
            media_type = BINARY
        content, encoding = compress(encoded.body, accept_encoding)
        if encoding:
            extra["Content-Encoding"] = encoding
        return content, extra, media_type


async def _unless_disconnected(receive: Receive, inference: Awaitable[InferenceResponse]) -> InferenceResponse:
    """Await `inference`, cancelling it when the client disconnects first: the server then
    drops the request from its model's queue, as Triton does."""
    task = asyncio.current_task()
    watch = _DisconnectWatch(receive, task)
    try:
        return await inference
    except asyncio.CancelledError:
        if not watch.fired or task is None:
            raise
        task.uncancel()
        raise NaiadError.cancelled_request() from None
    finally:
        watch.close()


# Requests answered sooner than this never start a disconnect watch: most requests pay
# one timer instead of a task, and a client that leaves is noticed at most this later.
_WATCH_AFTER_S = 0.02


class _DisconnectWatch:
    """Cancels `task` when the client disconnects while its inference waits."""

    def __init__(self, receive: Receive, task: asyncio.Task[Any] | None) -> None:
        self._receive = receive
        self._task = task
        self.fired = False
        self._watcher: asyncio.Task[None] | None = None
        self._timer = asyncio.get_running_loop().call_later(_WATCH_AFTER_S, self._start)

    def _start(self) -> None:
        self._watcher = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        # The body is read: the next message from the server is the disconnect, if it comes.
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self.fired = True
        if self._task is not None:
            self._task.cancel()

    def close(self) -> None:
        self._timer.cancel()
        if self._watcher is not None:
            self._watcher.cancel()


def infer_target(path: str) -> tuple[str, str] | None:
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


_WANTED_HEADERS = (b"content-length", b"content-encoding", b"accept-encoding", b"inference-header-content-length")


class NaiadHttpApp:
    """The ASGI app: infer requests are answered here, the rest by the starlette app."""

    def __init__(self, infer: InferEndpoint, app: Starlette) -> None:
        self.infer = infer
        self.app = app

    @property
    def routes(self) -> list[Any]:
        return self.app.routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            target = infer_target(scope["path"])
            if target is not None:
                restriction = self.infer.restriction
                if restriction is not None and not restriction.allows(_decoded(scope["headers"])):
                    await forbidden(restriction)(scope, receive, send)
                    return
                await self._infer(scope, receive, send, *target)
                return
        await self.app(scope, receive, send)

    async def _infer(self, scope: Scope, receive: Receive, send: Send, name: str, version: str) -> None:
        found: dict[bytes, str | None] = dict.fromkeys(_WANTED_HEADERS)
        for key, value in scope["headers"]:
            if key in found:
                found[key] = value.decode("latin-1")
        try:
            body = await self.infer.body.read(receive, found[b"content-length"], found[b"content-encoding"])
            content, extra, media_type = await self.infer.answer(
                name,
                version,
                body,
                found[b"inference-header-content-length"],
                found[b"accept-encoding"],
                receive,
                scope["headers"],
            )
        except ClientDisconnect:
            return
        except Exception as exc:  # noqa: BLE001 - answered like every other endpoint
            await error_for(exc, scope)(scope, receive, send)
            return
        headers = [(b"content-type", media_type.encode()), (b"content-length", str(len(content)).encode())]
        headers += [(key.encode("latin-1"), value.encode("latin-1")) for key, value in extra.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content})


def _decoded(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]
