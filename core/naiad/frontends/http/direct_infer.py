"""KServe's `POST /v2/models/<name>[/versions/<v>]/infer` as naiad_wire's HTTP/1.1 server's
direct route: answered straight from the parsed request, without the ASGI app."""

from __future__ import annotations

from collections.abc import Awaitable

from naiad_wire.http1 import DirectAnswer, Request

from .infer_endpoint import HEADER_LENGTH, InferEndpoint, infer_target

__all__ = ["DirectInfer"]

_HEADER_LENGTH = HEADER_LENGTH.lower().encode()


class DirectInfer:
    def __init__(self, infer: InferEndpoint) -> None:
        self.infer = infer

    def __call__(self, request: Request) -> Awaitable[DirectAnswer] | None:
        # Restricted inference (--http-restricted-api) goes through the ASGI app, which checks headers.
        if (
            request.method != b"POST"
            or b"%" in request.url
            or b"?" in request.url
            or self.infer.restriction is not None
        ):
            return None
        target = infer_target(request.url.decode("latin-1"))
        return None if target is None else self._answer(request, *target)

    async def _answer(self, request: Request, name: str, version: str) -> DirectAnswer:
        encoding = header_length = accept = None
        for key, value in request.headers:
            if key == b"content-encoding":
                encoding = value.decode("latin-1")
            elif key == _HEADER_LENGTH:
                header_length = value.decode("latin-1")
            elif key == b"accept-encoding":
                accept = value.decode("latin-1")
        infer = self.infer
        body = infer.body.decoded(request.body, encoding)
        content, extra, media_type = await infer.answer(
            name, version, body, header_length, accept, headers=request.headers
        )
        return content, media_type, extra
