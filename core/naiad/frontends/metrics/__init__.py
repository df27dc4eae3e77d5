"""The Prometheus metrics frontend: `GET /metrics` on its `MetricsOptions` address and port.

Per-model counters are read from the server's statistics at scrape time; CPU and GPU
gauges are sampled every `--metrics-interval-ms` in a worker thread. The endpoint is a
bare ASGI app on uvicorn, in the server's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from naiad_wire.listen import listen

from ..options import HttpOptions, MetricsOptions
from .exposition import CONTENT_TYPE, Family, render
from .model_families import cache_families, custom_families, model_families
from .system_gauges import SystemGauges

if TYPE_CHECKING:
    from ...server import Server

__all__ = ["run", "MetricsEndpoint"]

log = logging.getLogger("naiad.metrics")


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


async def run(server: Server, options: MetricsOptions, started: asyncio.Event) -> None:
    """Serve `/metrics` until cancelled (the frontend contract of `naiad serve`)."""
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # `naiad serve` owns SIGINT/SIGTERM and stops frontends by cancelling them.
            yield

    # No address of its own: the HTTP frontend's (`naiad serve` passes --http-address).
    host = options.address or HttpOptions().address
    sock = listen(host, options.port, backlog=128, name="metrics:")
    endpoint = MetricsEndpoint(server)
    endpoint.gauges.start_gpu()
    interval = server.metrics_settings.interval_ms / 1000.0
    sampler = asyncio.create_task(endpoint.gauges.run(interval), name="naiad-metrics-sampler")
    # uvicorn's own info lines ("Started server process") would speak for naiad under its name.
    config = uvicorn.Config(
        endpoint, log_config=None, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1
    )
    web = _Server(config)
    serving = asyncio.create_task(web.serve(sockets=[sock]), name="naiad-metrics-uvicorn")
    try:
        while not web.started:
            if serving.done():
                serving.result()
                raise RuntimeError("metrics server stopped during start-up")
            await asyncio.sleep(0.01)
        log.info("Started Metrics Service at %s:%d", host, sock.getsockname()[1])
        started.set()
        await asyncio.shield(serving)
    finally:
        web.should_exit = True
        sampler.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(serving, timeout=5)
        with contextlib.suppress(BaseException):
            await sampler
        endpoint.gauges.stop()
        sock.close()
