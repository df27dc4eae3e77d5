"""The HTTP/REST frontend: KServe v2 with Triton's extensions (see docs/http.md).

`naiad serve` starts it through `run`; an application embedding `naiad.Server` can mount
`create_app(server)` in any ASGI server instead.
"""

from __future__ import annotations

import asyncio
import logging

from naiad_wire.listen import listen

from ...server import Server
from ..kserve.header_pattern import compile_header_pattern
from ..kserve.restrictions import parse_restrictions
from ..options import MAX_INPUT_SIZE as DEFAULT_MAX_INPUT_SIZE
from ..options import HttpOptions
from .app import create_app
from .generate_mapping import generate_request
from .server import serve_hypercorn, serve_naiad, serve_uvicorn

__all__ = ["run", "create_app", "DEFAULT_MAX_INPUT_SIZE", "HttpOptions", "generate_request", "serve_uvicorn"]

log = logging.getLogger("naiad.http")


async def run(server: Server, options: HttpOptions, started: asyncio.Event) -> None:
    """Serve HTTP on the options' address and port until cancelled."""
    if options.max_input_size <= 0:
        raise ValueError(f"--http-max-input-size must be positive, got {options.max_input_size}")
    restrictions = parse_restrictions(options.restricted_apis, "--http-restricted-api", "api")
    pattern = options.header_forward_pattern
    forward = compile_header_pattern(pattern, "--http-header-forward-pattern") if pattern else None
    app = create_app(server, options.max_input_size, restrictions, forward)
    keep_alive_s, header_timeout_s = options.keepalive_timeout_s, options.header_read_timeout_s
    for flag, value in (
        ("--http-keepalive-timeout", keep_alive_s),
        ("--http-header-read-timeout", header_timeout_s),
        ("--http-body-read-timeout", options.body_read_timeout_s),
        ("--http-write-timeout", options.write_timeout_s),
        ("--http-max-buffered-bytes", options.max_buffered_bytes),
    ):
        if value <= 0:
            raise ValueError(f"{flag} must be positive, got {value:g}")
    if options.body_min_rate < 0:
        raise ValueError(f"--http-body-min-rate must be 0 or more, got {options.body_min_rate}")
    kind = options.server
    sock = listen(options.address, options.port, reuse_port=options.reuse_port, name="HTTP frontend")
    log.info("Started HTTPService at %s:%d (%s)", options.address, sock.getsockname()[1], kind)
    if kind == "hypercorn":
        await serve_hypercorn(app, sock, started, keep_alive_s)
    elif kind == "uvicorn":
        await serve_uvicorn(app, sock, started, keep_alive_s)
    else:
        await serve_naiad(app, sock, started, server.options.exit_timeout_secs, options)
