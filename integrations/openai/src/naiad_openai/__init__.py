"""naiad-openai: an OpenAI-compatible API (`/v1/models`, `/v1/completions`,
`/v1/chat/completions`) in front of the naiad models that follow the text convention of
`convention.py`. See docs/openai.md.

`naiad serve --allow-openai true` starts it beside the KServe frontends through `run`, on the
same in-process server; an application embedding `naiad.Server` can mount `create_app(server)`
in any ASGI server instead.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from naiad import Server
from naiad.frontends.http import HttpOptions, serve_uvicorn
from naiad_wire.listen import listen

from .app import create_app
from .chat_template import chat_prompt
from .convention import follows_convention

__all__ = ["run", "create_app", "chat_prompt", "follows_convention"]

log = logging.getLogger("naiad.openai")


async def run(server: Server, args: argparse.Namespace, started: asyncio.Event) -> None:
    """Serve the OpenAI API on --openai-address:--openai-port until cancelled."""
    address = args.openai_address or args.http_address
    # With --workers, every worker process listens on the port, as for HTTP.
    sock = listen(address, args.openai_port, reuse_port=getattr(args, "reuse_http_port", False), name="OpenAI frontend")
    log.info("Started OpenAI-compatible service at %s:%d", address, sock.getsockname()[1])
    await serve_uvicorn(create_app(server), sock, started, HttpOptions().keepalive_timeout_s)
