"""One Ray Serve replica: an in-process `naiad.Server`, reached two ways.

- Direct: naiad's own HTTP/1.1 and gRPC servers listen on the node's ports, shared by the
  replicas of the node (`listeners`). No Ray component is on the path of a request.
- Through Ray Serve's proxy: naiad's KServe v2 HTTP app is mounted through Ray Serve's
  public ingress (`@serve.ingress`), served when the application is run with a route prefix.
  The app is built per replica, after the server has started (`__serve_build_asgi_app__`),
  because it serves that replica's server: nothing of a server travels between processes.

Ray Serve checks the replica's health and collects its queue length for the autoscaling
policy (`record_autoscaling_stats`, read by `autoscaling.queue_pressure_policy`).
"""

from __future__ import annotations

from ray import serve
from starlette.types import ASGIApp

from naiad import Server, ServerOptions
from naiad.frontends.http import DEFAULT_MAX_INPUT_SIZE, create_app

from .autoscaling import PENDING_REQUESTS
from .listeners import DirectPorts, Listeners

__all__ = ["NaiadReplica"]


@serve.deployment(name="naiad")
@serve.ingress()
class NaiadReplica:
    """A naiad server answering the KServe v2 protocol."""

    async def __init__(
        self, options: ServerOptions, max_input_size: int = DEFAULT_MAX_INPUT_SIZE, direct: DirectPorts | None = None
    ) -> None:
        self._listeners: Listeners | None = None
        self._max_input_size = max_input_size
        self._server = Server(options)
        await self._server.start()
        failures = self._server.startup_failures
        if failures and options.exit_on_error:
            # As `naiad serve --exit-on-error=true` exits: Ray reports the replica as failed
            # with the reasons instead of routing to a server that is not ready.
            await self._server.stop()
            raise RuntimeError(f"{len(failures)} model(s) failed to load: " + "; ".join(failures))
        if direct is not None:
            try:
                self._listeners = await Listeners.start(self._server, direct)
            except BaseException:
                await self._server.stop()
                raise

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return create_app(self._server, self._max_input_size)

    async def check_health(self) -> None:
        """Ray Serve calls this periodically and replaces a replica that raises."""
        if not self._server.is_live():
            raise RuntimeError("the naiad server of this replica is not live")
        failure = self._listeners.failure() if self._listeners is not None else None
        if failure is not None:
            raise RuntimeError(failure)

    async def record_autoscaling_stats(self) -> dict[str, float]:
        """Ray Serve calls this every `metrics_interval_s` when the deployment autoscales."""
        models = self._server.models
        pending = sum(v.statistics.pending for v in models.ready_models()) if models is not None else 0
        return {PENDING_REQUESTS: float(pending)}

    async def __del__(self) -> None:
        # Ray Serve has let the requests it routed finish (graceful_shutdown_*); the direct
        # listeners stop taking connections and finish theirs.
        if self._listeners is not None:
            await self._listeners.stop()
        await self._server.stop()
