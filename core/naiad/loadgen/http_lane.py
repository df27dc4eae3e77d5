"""`HttpLane`: a `Lane` over one keep-alive HTTP/1.1 connection (opened again if the server
closes it)."""

from __future__ import annotations

import json
import time

from .http_connection import HttpConnection
from .lane import RequestFailed
from .target import Target

__all__ = ["HttpLane"]


class HttpLane:
    def __init__(self, target: Target, connection: HttpConnection) -> None:
        self._target = target
        self._connection = connection

    @classmethod
    async def open(cls, target: Target) -> HttpLane:
        return cls(target, await HttpConnection.open(target))

    async def infer(self, request: bytes) -> tuple[int, int]:
        if not self._connection.is_open:
            self._connection = await HttpConnection.open(self._target)
        start = time.perf_counter_ns()
        waiter = self._connection.send(request)
        sent = time.perf_counter_ns()
        try:
            answer = await waiter
        except ConnectionError as exc:
            raise RequestFailed(f"the connection to {self._target} was lost: {exc}") from None
        done = time.perf_counter_ns()
        if answer.status != 200:
            raise RequestFailed(f"HTTP {answer.status}: {_error_text(answer.body)}")
        return sent - start, done - answer.first_byte_ns

    async def close(self) -> None:
        self._connection.close()


def _error_text(body: bytes) -> str:
    try:
        document = json.loads(body)
    except ValueError:
        return body.decode(errors="replace").strip() or "(no body)"
    error = document.get("error") if isinstance(document, dict) else None
    return error if isinstance(error, str) else body.decode(errors="replace")
