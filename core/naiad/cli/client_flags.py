"""`ClientFlags`: the flags every client subcommand of `naiad` shares (`naiad models`,
`naiad infer`): where the server is, and how long to wait for it."""

from __future__ import annotations

from dataclasses import dataclass

from ..option_fields import option
from .kserve_client import KServeClient, base_url

__all__ = ["ClientFlags"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientFlags:
    url: str = option(
        "localhost:8000",
        "--url",
        "the server's HTTP/REST endpoint: HOST:PORT, or an http:// or https:// URL",
        aliases=("-u",),
        metavar="URL",
        parse=base_url,
    )
    timeout: float = option(60.0, "--timeout", "seconds to wait for each answer of the server", metavar="SECONDS")

    def client(self) -> KServeClient:
        return KServeClient(base_url(self.url), self.timeout)
