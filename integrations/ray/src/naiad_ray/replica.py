"""One Ray Serve replica: an in-process `naiad.Server` with naiad's own KServe v2 HTTP app
in front of it, mounted through Ray Serve's public ingress (`@serve.ingress`).

The app is built per replica, after the server has started (`__serve_build_asgi_app__`),
because it serves that replica's server: nothing of a server travels between processes.
"""

from __future__ import annotations

from naiad import Server, ServerOptions
from naiad.frontends.http import DEFAULT_MAX_INPUT_SIZE, create_app
from ray import serve
from starlette.types import ASGIApp

__all__ = ["NaiadReplica"]


@serve.deployment(name="naiad")
@serve.ingress()
class NaiadReplica:
    """A naiad server answering the KServe v2 HTTP protocol (JSON and binary tensors)."""

    async def __init__(self, options: ServerOptions, max_input_size: int = DEFAULT_MAX_INPUT_SIZE) -> None:
        self._server = Server(options)
        self._max_input_size = max_input_size
        await self._server.start()
        failures = self._server.startup_failures
        if failures and options.exit_on_error:
            # As `naiad serve --exit-on-error=true` exits: Ray reports the replica as failed
            # with the reasons instead of routing to a server that is not ready.
            await self._server.stop()
            raise RuntimeError(f"{len(failures)} model(s) failed to load: " + "; ".join(failures))

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return create_app(self._server, self._max_input_size)

    def check_health(self) -> None:
        """Ray Serve calls this periodically and replaces a replica that raises."""
        if not self._server.is_live():
            raise RuntimeError("the naiad server of this replica is not live")

    async def __del__(self) -> None:
        # Ray Serve has already let the requests in flight finish (graceful_shutdown_*).
        await self._server.stop()
