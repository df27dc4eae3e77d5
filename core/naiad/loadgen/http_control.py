"""`HttpControl`: `Control` over KServe v2 HTTP/REST, on one keep-alive connection."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from .http_connection import HttpConnection
from .load_error import LoadError
from .target import Target

__all__ = ["HttpControl", "model_path"]


def model_path(model: str, version: str) -> str:
    path = "/v2/models/" + urllib.parse.quote(model, safe="")
    if version:
        path += "/versions/" + urllib.parse.quote(version, safe="")
    return path


class HttpControl:
    def __init__(self, target: Target, model: str, version: str) -> None:
        self._target = target
        self._model = model
        self._path = model_path(model, version)
        self._connection: HttpConnection | None = None

    async def model_metadata(self) -> dict[str, Any]:
        return await self._call("GET", self._path)

    async def model_config(self) -> dict[str, Any]:
        return await self._call("GET", self._path + "/config")

    async def model_statistics(self) -> dict[str, Any]:
        return await self._call("GET", self._path + "/stats")

    async def register_system_shm(self, name: str, key: str, byte_size: int) -> None:
        body = {"key": key, "offset": 0, "byte_size": byte_size}
        await self._call("POST", f"/v2/systemsharedmemory/region/{urllib.parse.quote(name)}/register", body)

    async def unregister_system_shm(self, name: str) -> None:
        await self._call("POST", f"/v2/systemsharedmemory/region/{urllib.parse.quote(name)}/unregister", {})

    async def close(self) -> None:
        if self._connection is not None:
            self._connection.close()

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._connection is None or not self._connection.is_open:
            self._connection = await HttpConnection.open(self._target, keep_body=True)
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: {self._target}\r\nContent-Length: {len(data)}\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        try:
            answer = await self._connection.send(head.encode() + b"\r\n" + data)
        except ConnectionError as exc:
            raise LoadError(f"{method} {path}: the server at {self._target} closed the connection ({exc})") from None
        try:
            document = json.loads(answer.body or b"{}")
        except ValueError:
            raise LoadError(
                f"{method} {path}: the answer is not JSON (is {self._target} a KServe v2 HTTP endpoint?)"
            ) from None
        if answer.status >= 400:
            error = document.get("error") if isinstance(document, dict) else None
            raise LoadError(f"{method} {path}: HTTP {answer.status}: {error or answer.body.decode(errors='replace')}")
        if not isinstance(document, dict):
            raise LoadError(f"{method} {path}: the answer is not a JSON object")
        return document
