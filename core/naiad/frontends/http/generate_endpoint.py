"""`POST /v2/models/{m}[/versions/{v}]/generate` and `.../generate_stream` (Triton's generate
extension): one JSON answer, or Server-Sent Events, one `data: {...}` event per response.

As in Triton, a request that fails before inference starts gets an ordinary JSON error with
its status; once a stream has begun, an error is an event `data: {"error": "..."}` (the status
line was decided by the first response), and the stream ends on the final response.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import orjson
from starlette.responses import Response, StreamingResponse

from ...errors import HTTP_STATUS, NaiadError
from ...inference import InferenceRequest, InferenceResponse
from ...server import Server
from .generate_mapping import generate_answer, generate_request
from .responses import JSON

__all__ = ["GenerateEndpoint", "EVENT_STREAM"]

EVENT_STREAM = "text/event-stream; charset=utf-8"

# Triton's words when /generate meets a model that answered other than once.
_NOT_ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, use generate stream for model that "
    "generates various number of responses"
)


class GenerateEndpoint:
    """Maps generate bodies onto `Server.infer_stream` and its responses back to JSON."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def request(self, name: str, version: str, document: dict[str, Any]) -> InferenceRequest:
        return generate_request(document, self.server.model_config(name, version), version)

    async def generate(self, name: str, version: str, document: dict[str, Any]) -> Response:
        responses = self._responses(self.request(name, version, document))
        try:
            first = await anext(responses, None)
            if first is not None and first.error is not None:
                raise first.error
            # A second response is refused at once; the stream is closed, cancelling the rest.
            if first is None or await anext(responses, None) is not None:
                raise NaiadError.internal(_NOT_ONE_RESPONSE)
        finally:
            await responses.aclose()
        return Response(_encoded(generate_answer(first)), media_type=JSON)

    async def generate_stream(self, name: str, version: str, document: dict[str, Any]) -> Response:
        responses = self._responses(self.request(name, version, document))
        # Bad input and unknown models fail here, before the stream starts, as plain JSON errors.
        first = await anext(responses, None)
        status = 200 if first is None or first.error is None else HTTP_STATUS.get(first.error.code, 500)
        return StreamingResponse(_events(first, responses), status_code=status, media_type=EVENT_STREAM)

    async def _responses(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        """Every response that carries something: the bare end-of-stream marker of a
        decoupled model is dropped, as Triton drops it."""
        async for response in self.server.infer_stream(request):
            if response.outputs or response.error is not None or not response.final:
                yield response


async def _events(
    first: InferenceResponse | None, rest: AsyncGenerator[InferenceResponse, None]
) -> AsyncIterator[bytes]:
    try:
        if first is None:
            return
        yield _event(first)
        async for response in rest:
            yield _event(response)
    finally:
        # A client that went away closes this stream: closing `rest` cancels the request.
        await rest.aclose()


def _event(response: InferenceResponse) -> bytes:
    if response.error is not None:
        document: dict[str, Any] = {"error": response.error.message}
    else:
        document = generate_answer(response)
    return b"data: " + _encoded(document) + b"\n\n"


def _encoded(document: dict[str, Any]) -> bytes:
    # Outputs of more than one element stay numpy arrays; orjson writes them natively.
    return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
