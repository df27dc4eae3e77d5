"""naiad's own HTTP/1.1 and gRPC servers inside a replica: the direct path.

Every replica on a node listens on the same two ports with SO_REUSEPORT, as the worker
processes of `naiad serve --workers N` do, so the kernel spreads new connections over the
replicas of that node and no proxy sits between a client and the replica that answers it.
The servers are the very frontends `naiad serve` runs (`naiad.frontends.http.run`,
`naiad.frontends.grpc.run`), driven by the same option classes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import naiad.frontends.grpc as grpc_frontend
import naiad.frontends.http as http_frontend
from naiad import Server
from naiad.frontends.grpc import GrpcOptions
from naiad.frontends.http import DEFAULT_MAX_INPUT_SIZE, HttpOptions

__all__ = ["DirectPorts", "Listeners"]


@dataclass(frozen=True)
class DirectPorts:
    """Where the replicas of one node listen: `http_port` and `grpc_port` on `host` (None
    leaves that protocol out). Every replica of the application uses the same values."""

    host: str = "0.0.0.0"
    http_port: int | None = 8000
    grpc_port: int | None = 8001
    max_input_size: int = DEFAULT_MAX_INPUT_SIZE

    def __post_init__(self) -> None:
        for name in ("http_port", "grpc_port"):
            port = getattr(self, name)
            if port is not None and not 0 < port < 65536:
                # Port 0 would give every replica a port of its own: clients could not find them.
                raise ValueError(f"{name} must be a port number from 1 to 65535, got {port}")
        if self.http_port is not None and self.http_port == self.grpc_port:
            raise ValueError(f"http_port and grpc_port must differ, both are {self.http_port}")

    def http_options(self) -> HttpOptions | None:
        """The HTTP frontend's options, `naiad serve`'s defaults on this node's shared port;
        None without an HTTP port."""
        if self.http_port is None:
            return None
        return HttpOptions(address=self.host, port=self.http_port, reuse_port=True, max_input_size=self.max_input_size)

    def grpc_options(self) -> GrpcOptions | None:
        """The gRPC frontend's options, `naiad serve`'s defaults on this node's shared port;
        None without a gRPC port."""
        if self.grpc_port is None:
            return None
        return GrpcOptions(address=self.host, port=self.grpc_port, reuse_port=True)


class Listeners:
    """The HTTP and gRPC servers of one replica, serving until `stop`."""

    def __init__(self, tasks: dict[str, asyncio.Task[None]]) -> None:
        self._tasks = tasks  # one `run` of a `naiad serve` frontend per protocol

    @classmethod
    async def start(cls, server: Server, ports: DirectPorts) -> Listeners:
        """Listen on `ports`; raises (naming the address) when a port cannot be bound."""
        frontends: list[tuple[str, Any, HttpOptions | GrpcOptions | None]] = [
            ("http", http_frontend, ports.http_options()),
            ("grpc", grpc_frontend, ports.grpc_options()),
        ]
        tasks: dict[str, asyncio.Task[None]] = {}
        listeners = cls(tasks)
        for name, frontend, options in frontends:
            if options is None:
                continue
            started = asyncio.Event()
            task = asyncio.create_task(frontend.run(server, options, started), name=f"naiad-ray-{name}")
            tasks[name] = task
            waiter = asyncio.create_task(started.wait())
            await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                waiter.cancel()
                await listeners.stop()
                task.result()  # raises the frontend's reason
                raise RuntimeError(f"the {name} frontend stopped before it listened")
        return listeners

    def failure(self) -> str | None:
        """Why a server stopped serving on its own, if one did."""
        for name, task in self._tasks.items():
            if task.done():
                error = None if task.cancelled() else task.exception()
                return f"the {name} server stopped: {error!r}"
        return None

    async def stop(self) -> None:
        """Stop listening (the kernel then gives new connections to the other replicas of
        the node), let the requests being answered finish for up to the server's `exit_timeout_secs`,
        and close: what a frontend's `run` does when cancelled, as at `naiad serve`'s exit."""
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
