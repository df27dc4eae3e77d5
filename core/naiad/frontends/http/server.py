"""Runs the HTTP app under naiad's own HTTP/1.1 server (`http1`, the default and fastest),
uvicorn (`--http-server uvicorn`) or hypercorn (`--http-server hypercorn`, which adds HTTP/2,
also in cleartext with prior knowledge).

The listening socket is bound here first, so a port in use is a clear error from `run`
rather than an exit from inside the ASGI server, and the CLI keeps owning the signals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

from starlette.types import ASGIApp

from naiad_wire.http1 import Http1Server

from ..options import HttpOptions
from .direct_infer import DirectInfer
from .infer_endpoint import NaiadHttpApp
from .responses import error_for

__all__ = ["serve_naiad", "serve_uvicorn", "serve_hypercorn"]

log = logging.getLogger("naiad.http")


async def serve_naiad(
    app: NaiadHttpApp, sock: socket.socket, started: asyncio.Event, grace_s: float, options: HttpOptions
) -> None:
    body = app.infer.body
    server = Http1Server(
        app,
        body.max_input_size,
        options.keepalive_timeout_s,
        options.header_read_timeout_s,
        error_app=error_for,
        direct=DirectInfer(app.infer),
        body_limit_message=lambda size: body.too_large(size).message,
        body_timeout_s=options.body_read_timeout_s,
        body_min_rate=options.body_min_rate,
        write_timeout_s=options.write_timeout_s,
        max_buffered=options.max_buffered_bytes,
    )
    await server.start(sock)
    started.set()
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop(grace_s)


async def serve_uvicorn(app: ASGIApp, sock: socket.socket, started: asyncio.Event, keep_alive_s: float) -> None:
    try:
        import uvicorn
    except ImportError:
        sock.close()
        raise RuntimeError("--http-server uvicorn needs uvicorn: pip install 'naiad[uvicorn]'") from None

    class _EmbeddedServer(uvicorn.Server):
        # `naiad serve` handles SIGINT/SIGTERM itself and cancels the frontends.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    try:
        import httptools  # noqa: F401

        http = "httptools"
    except ImportError:
        http = "h11"
    config = uvicorn.Config(
        app,
        http=http,
        ws="none",
        lifespan="off",
        log_config=None,
        log_level="warning",  # naiad logs its own start-up lines
        access_log=False,
        server_header=False,
        # naiad reads no client address, so uvicorn's X-Forwarded-* middleware (a wrapper
        # around every request) would be pure cost.
        proxy_headers=False,
        timeout_keep_alive=keep_alive_s,
    )
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started serving")
            await asyncio.sleep(0.01)
        started.set()
        await asyncio.shield(task)
    finally:
        if not task.done():
            server.should_exit = True
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
        sock.close()


async def serve_hypercorn(app: ASGIApp, sock: socket.socket, started: asyncio.Event, keep_alive_s: float) -> None:
    try:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config
    except ImportError:
        sock.close()
        raise RuntimeError("--http-server hypercorn needs hypercorn: pip install 'naiad[http2]'") from None

    config = Config()
    # Hypercorn takes ownership of the descriptor.
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.keep_alive_timeout = keep_alive_s
    stop = asyncio.Event()
    options: dict[str, Any] = {"shutdown_trigger": stop.wait}
    task = asyncio.create_task(serve(app, config, **options))  # type: ignore[arg-type]
    try:
        # The socket already listens: connections made now wait in its backlog.
        await asyncio.sleep(0)
        if task.done():
            task.result()
        started.set()
        await asyncio.shield(task)
    finally:
        if not task.done():
            stop.set()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
