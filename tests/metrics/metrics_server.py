"""The metrics tests' models and an in-process server with the metrics frontend."""

import asyncio
import contextlib

import httpx
from numpy_backend import NumpyPlugin
from prometheus_text import parse

from naiad import Server
from naiad.cli import build_parser, frontend_options, options_from_args
from naiad.frontends import metrics as metrics_frontend
from naiad.frontends.options import MetricsOptions
from naiad.testing import free_port

ADD_SUB = """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]
parameters {key:"op" value {string_value:"add_sub"}}"""

FAILING = """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]}]
parameters {key:"op" value {string_value:"fail"}}"""


def make_model(repo, name, config, versions=(1,)):
    for v in versions:
        (repo / name / str(v)).mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config)


class MetricsServer:
    """An in-process Server built from `naiad serve` flags, with the metrics frontend
    started by the same `run(server, options, started)` the CLI uses, on a loopback port."""

    def __init__(self, repo, *flags, plugins=()):
        self.port = free_port()
        self.args = build_parser().parse_args(
            [
                "serve",
                "--model-repository",
                str(repo),
                "--metrics-address",
                "127.0.0.1",
                "--metrics-port",
                str(self.port),
                *flags,
            ]
        )
        options = options_from_args(self.args)
        options.backend_plugins = [NumpyPlugin(), *plugins]
        self.server = Server(options)
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self._task = None

    async def __aenter__(self):
        await self.server.start()
        started = asyncio.Event()
        self._task = asyncio.create_task(
            metrics_frontend.run(self.server, frontend_options(MetricsOptions, self.args), started)
        )
        waiter = asyncio.create_task(started.wait())
        await asyncio.wait([waiter, self._task], return_when=asyncio.FIRST_COMPLETED)
        if self._task.done():
            self._task.result()
        return self

    async def __aexit__(self, *exc):
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self.server.stop()

    async def scrape(self):
        async with httpx.AsyncClient() as client:
            response = await client.get(self.url)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        return response.text, *parse(response.text)
