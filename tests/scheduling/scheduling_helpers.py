"""Shared set-up for the scheduling tests: the numpy test backend, and a way to write a
model into a temporary repository and serve it in-process."""

from __future__ import annotations

import asyncio
import sys
from contextlib import asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numpy_backend import NumpyPlugin  # noqa: E402

from naiad import Server, ServerOptions  # noqa: E402


def write_model(repo: Path, name: str, config: str) -> Path:
    version = repo / name / "1"
    version.mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(config)
    return version


@asynccontextmanager
async def serving(repo: Path):
    server = Server(ServerOptions([str(repo)], backend_plugins=[NumpyPlugin()], load_backend_entry_points=False))
    await server.start()
    try:
        assert not server.startup_failures, server.startup_failures
        yield server
    finally:
        await server.stop()


def model_of(server: Server, name: str):
    """The numpy backend's Model object serving `name` (holds the execution records)."""
    return server.model(name).model


async def wait_until(condition, what: str, limit: float = 30.0) -> None:
    """Poll `condition` until it holds; a generous limit only guards against hangs."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"gave up waiting until {what}")
        await asyncio.sleep(0.005)
