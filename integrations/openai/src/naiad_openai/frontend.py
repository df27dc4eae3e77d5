"""The OpenAI API as a `naiad serve` frontend: its flags (`OpenAIOptions`) and `FRONTEND`,
registered under the `naiad.frontends` entry point group."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from naiad.frontends import Frontend, option

if TYPE_CHECKING:
    from naiad import Server

__all__ = ["FRONTEND", "OpenAIOptions", "run"]

log = logging.getLogger("naiad.openai")


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIOptions:
    enabled: bool = option(False, "--allow-openai", "serve /v1/models, /v1/completions, /v1/chat/completions")
    port: int = option(9000, "--openai-port", "OpenAI API port")
    # None: the HTTP frontend's address.
    address: str | None = option(None, "--openai-address", "OpenAI API address (default: the HTTP address)")
    # With --workers, every worker process listens on the port, as for HTTP.
    reuse_port: bool = False


async def run(server: Server, options: OpenAIOptions, started: asyncio.Event) -> None:
    """Serve the OpenAI API on the options' address and port until cancelled."""
    # Imported here: reading the flags (every `naiad serve`) needs none of it.
    from naiad.frontends.http import HttpOptions, serve_uvicorn
    from naiad_wire.listen import listen

    from .app import create_app

    address = options.address or HttpOptions().address
    sock = listen(address, options.port, reuse_port=options.reuse_port, name="OpenAI frontend")
    log.info("Started OpenAI-compatible service at %s:%d", address, sock.getsockname()[1])
    await serve_uvicorn(create_app(server), sock, started, HttpOptions().keepalive_timeout_s)


FRONTEND = Frontend(
    name="openai",
    title="OpenAI-compatible API (the naiad-openai package)",
    options=OpenAIOptions,
    run=run,
    order=40,
    address_from="http",
    # Imported before --workers processes fork, so none imports it again.
    imports=("naiad_openai.app", "naiad.frontends.http"),
)
