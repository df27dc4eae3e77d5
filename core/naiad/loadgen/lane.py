"""`Lane`: one connection that carries one request at a time (a concurrency slot), and
`RequestFailed`, a request the server answered with an error or that the connection lost."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Lane", "RequestFailed"]


class RequestFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Lane(Protocol):
    async def infer(self, request: bytes) -> tuple[int, int]:
        """Send one encoded request and wait for its answer: (send ns, receive ns), the
        client's own time writing it and reading the answer; RequestFailed on an error."""
        ...

    async def close(self) -> None: ...
