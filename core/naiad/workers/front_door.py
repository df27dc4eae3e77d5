"""`FrontDoor`: a worker of `naiad serve --workers N` without models.

A front door accepts connections, decodes and encodes HTTP and gRPC, and hands every
inference request to the model home (model_home.py), the worker where the models live once
for the whole server. To the frontends it is the `Server` they know: configs come from its
copy of the model table (model_mirror.py); statistics, the status page's figures, readiness, the repository index,
trace settings and model control are the model home's; client shared-memory regions and
log settings are every worker's own, kept equal as worker_server.py says.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any, NoReturn

from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..models.records import unknown_model
from ..safe_names import check_model_name
from ..server import ServerOptions
from .home_link import HomeLink
from .model_mirror import MirroredVersion, ModelMirror
from .replicated import HomeTracing
from .topology import Topology
from .worker_server import QUICK_CALL_S, WorkerServer

__all__ = ["FrontDoor", "RING_BYTES"]

log = logging.getLogger("naiad.workers")

# Bytes of each of a front door's two rings. Pages are touched as the ring cycles; the
# writer starts again at the beginning whenever the reader has caught up, so light traffic
# keeps to the first pages. A tensor that does not fit spills to a file of its own.
RING_BYTES = 32 * 1024 * 1024
# Between attempts to reach a model home that does not listen (yet, or again).
_CONNECT_RETRY_S = 0.1
# How long an inference that reaches a front door while the model home is away (it died,
# and worker 0 forks it again; it serves once it has loaded the models: 0.3-2.4 s measured
# in docs/reliability.md) waits for it, instead of being refused at once.
HOME_AWAY_WAIT_S = 10.0


class FrontDoor(WorkerServer):
    def __init__(self, options: ServerOptions, topology: Topology) -> None:
        super().__init__(options, topology)
        self.mirror = ModelMirror(self.model_ready)
        self.tracing: HomeTracing = HomeTracing(self._ask_home)
        self._home = next(peer for peer in self.peers if peer.index == topology.home_index)
        self._link: HomeLink | None = None
        self._linking: asyncio.Task[None] | None = None
        # Done when the next link is made: what requests held while the model home is away wait on.
        self._relinked: asyncio.Future[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Listen for the other processes, take on what clients changed (when started again),
        and connect to the model home (waiting for it to serve). The frontends answer
        meanwhile: live, not ready, every model unavailable."""
        self.listen_for_peers()
        if self.topology.restarted:
            entries = await self.journal_of_worker_0()
            for operation, arguments in entries:
                try:
                    self.apply_here(operation, arguments)
                except NaiadError as exc:
                    log.error("%s could not replay %s: %s", self.label, operation, exc.message)
            log.info("%s replayed %d change(s) clients made since start-up", self.label, len(entries))
        link = await self._connect()
        self._linking = asyncio.create_task(self._keep_linked(link), name="naiad-home-link")

    async def _connect(self) -> HomeLink:
        """A link to the model home once it serves and has sent its model table."""
        while True:
            try:
                link = await HomeLink.connect(self.topology.home_path, self.topology.index, RING_BYTES, self.mirror)
            except OSError:
                await asyncio.sleep(_CONNECT_RETRY_S)
                continue
            try:
                await link.table_arrived
            except NaiadError:
                continue  # gone again before it sent its table
            self._link = link
            self._wake_held()
            return link

    async def _keep_linked(self, link: HomeLink) -> None:
        """Connect again whenever the model home goes away (it is started again)."""
        while True:
            await link.lost
            log.warning(
                "%s: the model home went away; requests wait up to %g s for it to be back", self.label, HOME_AWAY_WAIT_S
            )
            link = await self._connect()
            log.info("%s: connected to the model home again", self.label)

    def _wake_held(self) -> None:
        """Requests held while the model home was away go on (or, when draining, are refused)."""
        if self._relinked is not None and not self._relinked.done():
            self._relinked.set_result(None)
        self._relinked = None

    async def stop(self) -> None:
        self._draining = True
        self._live = False
        self._wake_held()
        if self._linking is not None:
            self._linking.cancel()
            await asyncio.gather(self._linking, return_exceptions=True)
        if self._link is not None:
            self._link.close()
        await super().stop()

    # -- what the model home answers ------------------------------------------------------

    def _ask_home(self, operation: str, *arguments: Any) -> Any:
        """A quick question to the model home, from the event loop (blocking it briefly)."""
        return self._home.call(operation, *arguments, timeout_s=QUICK_CALL_S)

    def is_ready(self) -> bool:
        if not self._live or self._link is None or self.mirror.unreachable is not None:
            return False
        try:
            return bool(self._ask_home("ready"))
        except NaiadError:
            return False

    def tell_home_workers_serve(self) -> None:
        """Worker 0, once every worker serves: the server may report ready (model_home.py)."""
        try:
            self._ask_home("workers_serve")
        except NaiadError as exc:
            log.error("the model home was not told that every worker serves; it reports not ready: %s", exc.message)

    def model_ready(self, name: str, version: str = "") -> bool:
        try:
            return bool(self._ask_home("model_ready", name, version))
        except NaiadError:
            return False

    def model(self, name: str, version: str = "") -> MirroredVersion:  # type: ignore[override]
        if self._link is None:
            self._refuse_while_loading(name)
        return self.mirror.get(name, version)

    def _refuse_while_loading(self, name: str) -> NoReturn:
        """Before the model home has loaded the models this front door has no table of them:
        the model home's index says what a single process would answer (the model is
        loading, or unknown); without it, that the server is still loading."""
        try:
            rows: list[dict[str, str]] | None = self._ask_home("index", False)
        except NaiadError:
            rows = None
        states = {row["name"]: row.get("state") for row in rows or []}
        if states.get(name) == "LOADING":
            raise NaiadError.unavailable(f"model '{name}' is loading")
        if rows is not None and name not in states:
            raise NaiadError.not_found(unknown_model(name))
        raise NaiadError.unavailable(f"model '{name}' is not available: the server is still loading its models")

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        return self._metadata_of(self.model(name, version), self.mirror.versions(name))

    def repository_index(self, ready_only: bool = False) -> list[dict[str, str]]:
        result: list[dict[str, str]] = self._ask_home("index", ready_only)
        return result

    def statistics(self, name: str = "", version: str = "") -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._ask_home("statistics", name, version)
        return result

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self._ask_home("status")
        return result

    async def load_model(
        self, name: str, config: dict[str, Any] | None = None, files: dict[str, bytes] | None = None
    ) -> None:
        check_model_name(name)
        await self._home_link().control("load", name, config, files)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        await self._home_link().control("unload", name, unload_dependents)

    def _home_link(self) -> HomeLink:
        if self._link is None:
            raise NaiadError.unavailable("the server is still loading its models")
        return self._link

    # -- inference: in the model home -------------------------------------------------------

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        link = await self._admit(request.model_name)
        try:
            key, answer = link.infer(request)
            try:
                return await answer
            except asyncio.CancelledError:
                link.cancel(key)
                raise
        finally:
            self._release()

    async def infer_stream(self, request: InferenceRequest) -> AsyncGenerator[InferenceResponse, None]:
        link = await self._admit(request.model_name)
        try:
            key, responses = link.stream(request)
        except BaseException:
            self._release()
            raise
        final = False
        try:
            while not final:
                response = await responses.get()
                if isinstance(response, NaiadError):
                    raise response
                final = response.final
                yield response
        finally:
            if not final:
                link.cancel(key)  # the consumer went away
            self._release()

    async def _admit(self, model: str) -> HomeLink:
        """The link to send a request for `model` on, counted in flight until `_release`.
        While the model home is away, the request waits for its return (a crash costs the
        requests in flight, not those that arrive while it is started again)."""
        if self._draining:
            raise NaiadError.unavailable("server is shutting down")
        if self._link is None:
            self._refuse_while_loading(model)
        link = self._home_link()
        if link.lost.done():
            link = await self._next_link(link)
        self._inflight += 1
        self._idle.clear()
        return link

    async def _next_link(self, lost: HomeLink) -> HomeLink:
        """The link made after `lost`, waited for up to HOME_AWAY_WAIT_S."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HOME_AWAY_WAIT_S
        link = lost
        while link.lost.done():
            if self._draining:
                raise NaiadError.unavailable("server is shutting down")
            if self._relinked is None:
                self._relinked = loop.create_future()
            try:
                await asyncio.wait_for(asyncio.shield(self._relinked), deadline - loop.time())
            except TimeoutError:
                raise NaiadError.unavailable(
                    f"the model home exited and is not back after {HOME_AWAY_WAIT_S:g} s (it is being started again)"
                ) from None
            link = self._home_link()
        return link

    def _release(self) -> None:
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()
