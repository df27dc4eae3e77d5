"""The Prometheus metrics frontend: `GET /metrics` on its `MetricsOptions` address and port.

Per-model counters are read from the server's statistics at scrape time; CPU and GPU
gauges are sampled every `--metrics-interval-ms` in a worker thread. The endpoint is a
bare ASGI app on naiad's own HTTP/1.1 server (`naiad_wire.http1`), in the server's event
loop: serving metrics needs no other HTTP server installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from naiad_wire.http1 import ASGIApp, Http1Server, Scope
from naiad_wire.listen import listen

from ..options import HttpOptions, MetricsOptions
from .exposition import CONTENT_TYPE, Family, render
from .model_families import cache_families, custom_families, model_families
from .system_gauges import SystemGauges

if TYPE_CHECKING:
    from ...server import Server

__all__ = ["run", "MetricsEndpoint"]

log = logging.getLogger("naiad.metrics")

# A scrape is a GET: a body is never read, so a small bound is all it needs.
_MAX_BODY = 64 << 10
# Time the scrapes being answered get to finish when the server stops.
_GRACE_S = 1.0


class MetricsEndpoint:
    """The ASGI app plus the CPU/GPU sampler of one server."""

    def __init__(self, server: Server) -> None:
        self.server = server
        settings = server.metrics_settings
        self.gauges = SystemGauges(settings.allow_cpu_metrics, settings.allow_gpu_metrics)

    def families(self) -> list[Family]:
        settings = self.server.metrics_settings
        return [
            *model_families(self.server, settings.counter_latencies),
            *cache_families(self.server),
            *self.gauges.families(),
            *custom_families(self.server),
        ]

    async def scrape(self) -> bytes:
        # Reading the counters is quick and must happen on the loop that updates them;
        # turning them into text can happen elsewhere.
        families = self.families()
        return await asyncio.to_thread(render, families)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"] != "/metrics":
            await _respond(send, 404, b"not found: metrics are served at /metrics\n", "text/plain; charset=utf-8")
        elif scope["method"] not in ("GET", "HEAD"):
            await _respond(send, 405, b"method not allowed: use GET\n", "text/plain; charset=utf-8")
        else:
            body = await self.scrape()
            await _respond(send, 200, body, CONTENT_TYPE, head=scope["method"] == "HEAD")


async def _respond(send: Any, status: int, body: bytes, content_type: str, head: bool = False) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else body})


def _error_answer(exc: Exception, scope: Scope) -> ASGIApp:
    """A scrape that failed: 500, its cause in the log, not in the answer."""
    log.error("unexpected error answering %s %s", scope.get("method"), scope.get("path"), exc_info=exc)

    async def answer(scope: Scope, receive: Any, send: Any) -> None:
        await _respond(send, 500, b"internal error while reading the metrics\n", "text/plain; charset=utf-8")

    return answer


async def run(server: Server, options: MetricsOptions, started: asyncio.Event) -> None:
    """Serve `/metrics` until cancelled (the frontend contract of `naiad serve`)."""
    # No address of its own: the HTTP frontend's (`naiad serve` passes --http-address).
    http = HttpOptions()
    host = options.address or http.address
    sock = listen(host, options.port, backlog=128, name="metrics:")
    endpoint = MetricsEndpoint(server)
    endpoint.gauges.start_gpu()
    interval = server.metrics_settings.interval_ms / 1000.0
    sampler = asyncio.create_task(endpoint.gauges.run(interval), name="naiad-metrics-sampler")
    # Only this process serves the metrics port (under --workers, the model home): its
    # connections never move to another process, which would answer with its KServe app.
    web = Http1Server(
        endpoint,
        _MAX_BODY,
        http.keepalive_timeout_s,
        http.header_read_timeout_s,
        error_app=_error_answer,
        balance=False,
    )
    try:
        await web.start(sock)
        log.info("Started Metrics Service at %s:%d", host, sock.getsockname()[1])
        started.set()
        await asyncio.Event().wait()
    finally:
        sampler.cancel()
        with contextlib.suppress(BaseException):
            await web.stop(_GRACE_S)
        with contextlib.suppress(BaseException):
            await sampler
        endpoint.gauges.stop()
        sock.close()
