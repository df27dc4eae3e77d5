"""`FrontDoor`: a worker process of `naiad serve --workers N`.

A front door accepts connections, decodes and encodes HTTP and gRPC, and hands every
inference request to the model home (model_home.py), where the models live once for the
whole server. To the frontends it is the `Server` they know: configs come from its copy of
the model table (model_mirror.py); statistics, readiness, the repository index, trace
settings and model control are the model home's; client shared-memory regions and log
settings are every front door's own, kept equal by the control plane (replicated.py).

Worker 0 keeps the server's journal: the latest form of every change a client made since
start-up, which a front door or model home started again replays before it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncGenerator, Callable
from typing import Any

from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..safe_names import check_model_name
from ..server import Server, ServerOptions
from .control_plane import ControlServer, Peer, PeerUnreachable, socket_path
from .home_link import HomeLink
from .journal import Journal
from .model_mirror import MirroredVersion, ModelMirror
from .replicated import HomeTracing, ReplicatedLogSettings, ReplicatedSharedMemory
from .topology import Topology

__all__ = ["FrontDoor", "RING_BYTES"]

log = logging.getLogger("naiad.workers")

# Bytes of each of a front door's two rings. Pages are touched as the ring cycles; the
# writer starts again at the beginning whenever the reader has caught up, so light traffic
# keeps to the first pages. A tensor that does not fit spills to a file of its own.
RING_BYTES = 32 * 1024 * 1024
# How long the event loop may wait for another process's answer to a quick question
# (statistics, readiness, a shared-memory registration).
_QUICK_CALL_S = 5.0
# Between attempts to reach a model home that does not listen (yet, or again).
_CONNECT_RETRY_S = 0.1


class FrontDoor(Server):
    def __init__(self, options: ServerOptions, topology: Topology) -> None:
        super().__init__(options)
        self.topology = topology
        self.journal = Journal()
        self.mirror = ModelMirror(self.model_ready)
        self.shared_memory: ReplicatedSharedMemory = ReplicatedSharedMemory(
            self.options.allow_client_shm, self._replicate
        )
        self.tracing: HomeTracing = HomeTracing(self._ask_home, self._share)
        self.log_settings = ReplicatedLogSettings(self.log_settings, self._replicate)  # type: ignore[assignment]
        self._peers = [
            Peer(i, socket_path(topology.directory, i)) for i in range(topology.count) if i != topology.index
        ]
        self._home = Peer(-1, topology.home_control_path)
        self._link: HomeLink | None = None
        self._linking: asyncio.Task[None] | None = None
        self._control: ControlServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._settings_changes: dict[tuple[str, str], dict[str, Any]] = {}

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Listen for the other processes, take on what clients changed (when started again),
        and connect to the model home (waiting for it to serve)."""
        self._loop = asyncio.get_running_loop()
        self._control = ControlServer(socket_path(self.topology.directory, self.topology.index), self._handlers())
        self._control.start()
        if self.topology.restarted:
            await self._rejoin()
        link = await self._connect()
        self._linking = asyncio.create_task(self._keep_linked(link), name="naiad-home-link")
        self._live = True

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
            return link

    async def _keep_linked(self, link: HomeLink) -> None:
        """Connect again whenever the model home goes away (it is started again)."""
        while True:
            await link.lost
            log.warning("worker %d: the model home went away; requests fail until it is back", self.topology.index)
            link = await self._connect()
            log.info("worker %d: connected to the model home again", self.topology.index)

    async def stop(self) -> None:
        self._draining = True
        self._live = False
        if self._linking is not None:
            self._linking.cancel()
            await asyncio.gather(self._linking, return_exceptions=True)
        if self._link is not None:
            self._link.close()
        if self._control is not None:
            self._control.close()
            # The last worker out removes the socket directory (a killed worker leaves its
            # socket behind, and worker 0 killed cannot clean up).
            for peer in self._peers:
                if not peer.listening():
                    with contextlib.suppress(OSError):
                        os.unlink(peer.path)
            with contextlib.suppress(OSError):
                os.rmdir(self.topology.directory)
        for peer in (*self._peers, self._home):
            peer.close()
        self.uploads.close()

    async def _rejoin(self) -> None:
        """A front door started again takes on what clients changed since start-up."""
        try:
            entries = await asyncio.to_thread(self._peers[0].call, "journal")
        except NaiadError as exc:
            log.error("worker %d could not read worker 0's journal: %s", self.topology.index, exc.message)
            return
        for operation, arguments in entries:
            try:
                self._apply_here(operation, arguments)
            except NaiadError as exc:
                log.error("worker %d could not replay %s: %s", self.topology.index, operation, exc.message)
        log.info("worker %d replayed %d change(s) clients made since start-up", self.topology.index, len(entries))

    # -- what the model home answers ------------------------------------------------------

    def _ask_home(self, operation: str, *arguments: Any) -> Any:
        """A quick question to the model home, from the event loop (blocking it briefly)."""
        return self._home.call(operation, *arguments, timeout_s=_QUICK_CALL_S)

    def is_ready(self) -> bool:
        if not self._live or self.mirror.unreachable is not None:
            return False
        try:
            return bool(self._ask_home("ready"))
        except NaiadError:
            return False

    def model_ready(self, name: str, version: str = "") -> bool:
        try:
            return bool(self._ask_home("model_ready", name, version))
        except NaiadError:
            return False

    def model(self, name: str, version: str = "") -> MirroredVersion:  # type: ignore[override]
        return self.mirror.get(name, version)

    def model_metadata(self, name: str, version: str = "") -> dict[str, Any]:
        return self._metadata_of(self.model(name, version), self.mirror.versions(name))

    def repository_index(self, ready_only: bool = False) -> list[dict[str, str]]:
        result: list[dict[str, str]] = self._ask_home("index", ready_only)
        return result

    def statistics(self, name: str = "", version: str = "") -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._ask_home("statistics", name, version)
        return result

    async def load_model(
        self, name: str, config: dict[str, Any] | None = None, files: dict[str, bytes] | None = None
    ) -> None:
        check_model_name(name)
        await self._home_link().control("load", name, config, files)
        self._share("load", name, config, files)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        await self._home_link().control("unload", name, unload_dependents)
        self._share("unload", name, unload_dependents)

    def _home_link(self) -> HomeLink:
        if self._link is None:
            raise NaiadError.unavailable("the model home is not reachable (it may be restarting)")
        return self._link

    # -- inference: in the model home -------------------------------------------------------

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        link = self._admit()
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
        link = self._admit()
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

    def _admit(self) -> HomeLink:
        """The link to send a request on, counted in flight until `_release`."""
        if self._draining:
            raise NaiadError.unavailable("server is shutting down")
        link = self._home_link()
        self._inflight += 1
        self._idle.clear()
        return link

    def _release(self) -> None:
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()

    # -- changes clients make: shared by the processes, kept in worker 0's journal --------------

    def _replicate(self, operation: str, *arguments: Any) -> None:
        """Apply a change, already applied here, on every other front door (and a log setting
        in the model home too); blocking: the control threads of the others answer."""
        self._record(operation, arguments)
        targets = self._peers + ([self._home] if operation == "log" else [])
        results: list[Any] = []
        for peer in targets:
            try:
                results.append(peer.call(operation, *arguments, timeout_s=_QUICK_CALL_S))
            except NaiadError as exc:
                results.append(exc)
        _raise_refusals(operation, zip(targets, results))

    def _share(self, operation: str, *arguments: Any) -> None:
        """Tell the other front doors of a change the model home applied, for their journals
        (worker 0's is the one replayed)."""
        self._record(operation, arguments)
        for peer in self._peers:
            with contextlib.suppress(NaiadError):
                peer.call(operation, *arguments, timeout_s=_QUICK_CALL_S)

    def _handlers(self) -> dict[str, Callable[..., Any]]:
        def here(operation: str) -> Callable[..., Any]:
            def handle(*arguments: Any) -> None:
                self._apply_here(operation, arguments)

            return handle

        operations = ("shm_register", "shm_unregister", "log", "load", "unload", "trace")
        return {**{op: here(op) for op in operations}, "journal": self.journal.entries}

    def _apply_here(self, operation: str, arguments: tuple[Any, ...]) -> None:
        """Apply one change in this front door only (for a peer, or a replay): the model
        home's own changes (load, unload, trace) are only recorded."""
        if operation == "shm_register":
            self.shared_memory.register_here(*arguments)
        elif operation == "shm_unregister":
            self.shared_memory.unregister_here(*arguments)
        elif operation == "log":
            self.log_settings.local.update(*arguments)  # type: ignore[attr-defined]
        elif operation not in ("load", "unload", "trace"):
            raise NaiadError.internal(f"control plane: unknown operation '{operation}'")
        self._record(operation, arguments)

    def _record(self, operation: str, arguments: tuple[Any, ...]) -> None:
        """Keep the latest form of each change for a process that is started again."""
        if operation in ("load", "unload"):
            self.journal.record(("model", arguments[0]), operation, *arguments)
        elif operation == "shm_register":
            self.journal.record(("shm", arguments[0]), operation, *arguments)
        elif operation == "shm_unregister":
            name = arguments[0]
            self.journal.forget(lambda key: key[0] == "shm" and (name is None or key[1] == name))
        elif operation in ("trace", "log"):
            # Settings accumulate: the journal keeps every key set so far, per model.
            model = arguments[1] if operation == "trace" else ""
            changes = self._settings_changes.setdefault((operation, model), {})
            changes.update(arguments[0])
            self.journal.record((operation, model), operation, dict(changes), *arguments[1:])


def _raise_refusals(operation: str, results: Any) -> None:
    """A process that refused what this one applied leaves the server incoherent: say so.
    One that cannot be reached is restarting and replays the journal when it is back."""
    refusals = [
        (peer.label, result)
        for peer, result in results
        if isinstance(result, BaseException) and not isinstance(result, PeerUnreachable)
    ]
    if not refusals:
        return
    for _, error in refusals:
        if not isinstance(error, NaiadError):
            raise error
    text = "; ".join(f"{label}: {error.message}" for label, error in refusals)
    raise NaiadError(refusals[0][1].code, f"{operation} was applied by this worker but refused by {text}")
