"""The OpenAI-compatible API as an ASGI app on an in-process `naiad.Server`:
`GET /v1/models`, `GET /v1/models/{model}`, `POST /v1/completions`, `POST /v1/chat/completions`.

Streaming answers are Server-Sent Events `data: {chunk}`, ending with `data: [DONE]`; an error
after the stream began is an event `data: {"error": {...}}` before it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from naiad import ErrorCode, InferenceResponse, ModelConfig, NaiadError, Server

from .chat_template import chat_prompt
from .convention import follows_convention, text_of, text_request
from .errors import error_body, error_status

__all__ = ["create_app", "MAX_BODY_BYTES"]

# Prompts are text: a body past this is refused before it is read whole.
MAX_BODY_BYTES = 4 * 1024 * 1024
OWNER = "naiad"

# Builds one choice of a completion object from (text, finish_reason); differs per endpoint.
ChoiceOf = Callable[[str, "str | None"], dict[str, Any]]


def _json(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


def _event(value: Any) -> bytes:
    return b"data: " + orjson.dumps(value) + b"\n\n"


class _Api:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.created = int(time.time())

    def _model_object(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": OWNER}

    def _text_model(self, name: Any) -> ModelConfig:
        if not isinstance(name, str) or not name:
            raise NaiadError.invalid("'model' must name a model")
        try:
            config = self.server.model_config(name)
        except NaiadError as exc:
            if exc.code is not ErrorCode.NOT_FOUND:
                raise  # e.g. UNAVAILABLE while it loads: said as it is
            raise NaiadError.not_found(f"The model `{name}` does not exist") from exc
        if not follows_convention(config):
            raise NaiadError.not_found(
                f"The model `{name}` does not exist as a text model (it needs a BYTES input 'text_input' and a "
                "BYTES output 'text_output')"
            )
        return config

    async def models(self, request: Request) -> Response:
        names = sorted({row["name"] for row in self.server.repository_index(ready_only=True)})
        texts = [name for name in names if follows_convention(self.server.model_config(name))]
        return _json({"object": "list", "data": [self._model_object(name) for name in texts]})

    async def model(self, request: Request) -> Response:
        name = request.path_params["model"]
        self._text_model(name)
        return _json(self._model_object(name))

    async def completions(self, request: Request) -> Response:
        body = await _body(request)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise NaiadError.invalid("'prompt' must be a string (or a list of one string)")

        def choice(text: str, finish: str | None) -> dict[str, Any]:
            return {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}

        return await self._answer(body, prompt, "cmpl", "text_completion", "text_completion", choice, None)

    async def chat_completions(self, request: Request) -> Response:
        body = await _body(request)
        prompt = chat_prompt(body.get("messages"))
        stream = body.get("stream") is True

        def choice(text: str, finish: str | None) -> dict[str, Any]:
            if not stream:
                message = {"role": "assistant", "content": text}
                return {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            delta = {"content": text} if text or finish is None else {}
            return {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}

        # A chat stream opens with the assistant's role, as OpenAI's does.
        opening = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None, "logprobs": None}
        return await self._answer(body, prompt, "chatcmpl", "chat.completion", "chat.completion.chunk", choice, opening)

    async def _answer(
        self,
        body: dict[str, Any],
        prompt: str,
        prefix: str,
        kind: str,
        chunk_kind: str,
        choice: ChoiceOf,
        opening: dict[str, Any] | None,
    ) -> Response:
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise NaiadError.invalid("'stream' must be true or false")
        if body.get("n", 1) != 1:
            raise NaiadError.invalid("only 'n': 1 is supported")
        config = self._text_model(body.get("model"))
        inference = text_request(config, prompt, stream, body)
        head = {
            "id": f"{prefix}-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": config.name,
            "system_fingerprint": None,
        }
        responses = self.server.infer_stream(inference)
        if not stream:
            texts = []
            try:
                async for response in responses:
                    if response.error is not None:
                        raise response.error
                    texts.append(text_of(response))
            finally:
                await responses.aclose()
            return _json({**head, "object": kind, "choices": [choice("".join(texts), "stop")]})
        # Bad input fails here, before the stream starts, as an ordinary error answer.
        first = await anext(responses, None)
        if first is not None and first.error is not None:
            await responses.aclose()
            raise first.error
        return StreamingResponse(
            _chunks(first, responses, {**head, "object": chunk_kind}, choice, opening), media_type="text/event-stream"
        )


async def _chunks(
    first: InferenceResponse | None,
    rest: AsyncGenerator[InferenceResponse, None],
    head: dict[str, Any],
    choice: ChoiceOf,
    opening: dict[str, Any] | None,
) -> AsyncIterator[bytes]:
    try:
        if opening is not None:
            yield _event({**head, "choices": [opening]})
        response = first
        while response is not None:
            if response.error is not None:
                yield _event(error_body(response.error))
                break
            text = text_of(response)
            if text:
                yield _event({**head, "choices": [choice(text, None)]})
            response = await anext(rest, None)
        else:
            yield _event({**head, "choices": [choice("", "stop")]})
        yield b"data: [DONE]\n\n"
    finally:
        # A client that went away closes this stream: closing `rest` cancels the request.
        await rest.aclose()


async def _body(request: Request) -> dict[str, Any]:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise NaiadError.invalid(f"the request body is larger than {MAX_BODY_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise NaiadError.invalid(f"the request body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    try:
        body = orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as exc:
        raise NaiadError.invalid(f"malformed JSON in the request body: {exc}") from None
    if not isinstance(body, dict):
        raise NaiadError.invalid("the request body must be a JSON object")
    return body


def _guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except NaiadError as exc:
            return _json(error_body(exc), error_status(exc))
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the server down
            error = NaiadError.unexpected(exc)
            return _json(error_body(error), error_status(error))

    return endpoint


def create_app(server: Server) -> Starlette:
    """The OpenAI-compatible ASGI app serving `server`'s text models."""
    api = _Api(server)
    return Starlette(
        routes=[
            Route("/v1/models", _guarded(api.models), methods=["GET"]),
            Route("/v1/models/{model}", _guarded(api.model), methods=["GET"]),
            Route("/v1/completions", _guarded(api.completions), methods=["POST"]),
            Route("/v1/chat/completions", _guarded(api.chat_completions), methods=["POST"]),
        ]
    )
