"""`Target`: the host and port a `LoadSpec.url` names."""

from __future__ import annotations

from dataclasses import dataclass

from ..endpoint_url import split_endpoint
from .load_error import LoadError

__all__ = ["Target"]


@dataclass(frozen=True, slots=True)
class Target:
    host: str
    port: int

    @classmethod
    def parse(cls, url: str, default_port: int) -> Target:
        """HOST:PORT as perf_analyzer's -u takes it; an http:// or grpc:// prefix is allowed."""
        try:
            parts = split_endpoint(url, "-u", ("http", "grpc"))
        except ValueError as exc:
            raise LoadError(str(exc)) from None
        assert parts.hostname is not None  # split_endpoint refuses a URL without one
        return cls(parts.hostname, default_port if parts.port is None else parts.port)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"
