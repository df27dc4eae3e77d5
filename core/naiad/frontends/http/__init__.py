"""The HTTP/REST frontend: KServe v2 with Triton's extensions (see docs/http.md).

`naiad serve` starts it through `run`; an application embedding `naiad.Server` can mount
`create_app(server)` in any ASGI server instead.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re

from naiad_wire.listen import listen

from ...server import Server
from ..restrictions import parse_restrictions
from .app import DEFAULT_MAX_INPUT_SIZE, create_app
from .server import HEADER_READ_SECONDS, KEEP_ALIVE_SECONDS, serve_hypercorn, serve_naiad, serve_uvicorn

__all__ = ["run", "create_app", "DEFAULT_MAX_INPUT_SIZE"]

log = logging.getLogger("naiad.http")


async def run(server: Server, args: argparse.Namespace, started: asyncio.Event) -> None:
    """Serve HTTP on --http-address:--http-port until cancelled."""
    max_input_size = getattr(args, "http_max_input_size", DEFAULT_MAX_INPUT_SIZE)
    if max_input_size <= 0:
        raise ValueError(f"--http-max-input-size must be positive, got {max_input_size}")
    restrictions = parse_restrictions(getattr(args, "http_restricted_api", []), "--http-restricted-api", "api")
    pattern = getattr(args, "http_header_forward_pattern", None)
    app = create_app(server, max_input_size, restrictions, re.compile(pattern) if pattern else None)
    keep_alive_s = getattr(args, "http_keepalive_timeout", KEEP_ALIVE_SECONDS)
    header_timeout_s = getattr(args, "http_header_read_timeout", HEADER_READ_SECONDS)
    if keep_alive_s <= 0 or header_timeout_s <= 0:
        raise ValueError("--http-keepalive-timeout and --http-header-read-timeout must be positive")
    kind = getattr(args, "http_server", "naiad")
    sock = listen(args.http_address, args.http_port, reuse_port=getattr(args, "reuse_http_port", False),
                  name="HTTP frontend")
    log.info("Started HTTPService at %s:%d (%s)", args.http_address, sock.getsockname()[1], kind)
    if kind == "hypercorn":
        await serve_hypercorn(app, sock, started, keep_alive_s)
    elif kind == "uvicorn":
        await serve_uvicorn(app, sock, started, keep_alive_s)
    else:
        await serve_naiad(app, sock, started, getattr(args, "exit_timeout_secs", 30), keep_alive_s, header_timeout_s)
