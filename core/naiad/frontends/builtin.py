"""naiad's own frontends as `Frontend` objects, registered in pyproject.toml under the entry
point group `naiad.frontends`. Each `run` imports its frontend when it starts, so reading the
flags (`naiad serve --help`) imports none of them."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .frontend import Frontend
from .options import GrpcOptions, HttpOptions, MetricsOptions

if TYPE_CHECKING:
    from ..server import Server

__all__ = ["GRPC", "HTTP", "METRICS"]


async def _run_http(server: Server, options: HttpOptions, started: asyncio.Event) -> None:
    from . import http

    await http.run(server, options, started)


async def _run_grpc(server: Server, options: GrpcOptions, started: asyncio.Event) -> None:
    from . import grpc

    await grpc.run(server, options, started)


async def _run_metrics(server: Server, options: MetricsOptions, started: asyncio.Event) -> None:
    from . import metrics

    await metrics.run(server, options, started)


HTTP = Frontend(
    name="http", title="HTTP/REST", options=HttpOptions, run=_run_http, order=10, imports=("naiad.frontends.http",)
)
GRPC = Frontend(
    name="grpc", title="gRPC", options=GrpcOptions, run=_run_grpc, order=20, imports=("naiad.frontends.grpc",)
)
METRICS = Frontend(
    name="metrics",
    title="metrics",
    options=MetricsOptions,
    run=_run_metrics,
    order=30,
    on_every_worker=False,
    address_from="http",
    imports=("naiad.frontends.metrics",),
)
