"""`Target`: the host and port a `LoadSpec.url` names."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from .load_error import LoadError

__all__ = ["Target"]


@dataclass(frozen=True, slots=True)
class Target:
    host: str
    port: int

    @classmethod
    def parse(cls, url: str, default_port: int) -> Target:
        """HOST:PORT as perf_analyzer's -u takes it; an http:// or grpc:// prefix is allowed."""
        text = url.strip().rstrip("/")
        if "://" not in text:
            text = f"http://{text}"
        parts = urllib.parse.urlsplit(text)
        if parts.scheme not in ("http", "grpc"):
            raise LoadError(f"-u '{url}': only plain http:// and grpc:// endpoints are supported (HOST:PORT)")
        if not parts.hostname:
            raise LoadError(f"-u '{url}' names no host (expected HOST:PORT, e.g. localhost:8000)")
        try:
            port = parts.port
        except ValueError:
            raise LoadError(f"-u '{url}': the port is not a number from 0 to 65535") from None
        return cls(parts.hostname, default_port if port is None else port)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"
