"""`WorkerServer`: the `Server` of one worker process, coherent with the other workers.

What a client changes through one worker is applied on every worker before the client gets
its answer (explicit model loads and unloads, shared-memory registrations, log and trace
settings); what a client reads is the whole server's (statistics, metrics); a request of a
sequence runs on the worker that owns its correlation id. The plain inference path is the
base class's: a request without a `sequence_id` parameter pays one dict lookup.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..errors import NaiadError
from ..frontends.metrics.exposition import Family
from ..frontends.metrics.model_families import cache_families, custom_families, model_families
from ..inference import InferenceRequest, InferenceResponse
from ..server import Server, ServerOptions
from .aggregation import merge_families, merge_statistics
from .control_plane import ControlServer, Peer, PeerUnreachable, socket_path
from .journal import Journal
from .replicated import ReplicatedLogSettings, ReplicatedSharedMemory, ReplicatedTracing
from .sequence_routing import portable_request, portable_responses, restore_responses, sequence_owner
from .topology import Topology

__all__ = ["WorkerServer"]

log = logging.getLogger("naiad.workers")

# How long the event loop may wait for a peer's answer to a quick call (statistics, a
# shared-memory registration); a worker that takes longer is left out, as one restarting is.
_QUICK_CALL_S = 5.0
# A forwarded read of statistics races with the owner's loop changing them: read again.
_READ_ATTEMPTS = 3


class WorkerServer(Server):
    def __init__(self, options: ServerOptions, topology: Topology) -> None:
        super().__init__(options)
        self.topology = topology
        self.journal = Journal()
        self.shared_memory: ReplicatedSharedMemory = ReplicatedSharedMemory(
            self.options.allow_client_shm, self._replicate
        )
        self.tracing: ReplicatedTracing = ReplicatedTracing(
            self.options.trace_settings, self._replicate, self._send_trace if topology.index else None
        )
        self.log_settings = ReplicatedLogSettings(self.log_settings, self._replicate)  # type: ignore[assignment]
        self._peers = [
            Peer(i, socket_path(topology.directory, i)) for i in range(topology.count) if i != topology.index
        ]
        self._control: ControlServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._settings_changes: dict[tuple[str, str], dict[str, Any]] = {}
        self._poll_everywhere: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        await super().start()
        self._loop = asyncio.get_running_loop()
        if self.poller is not None and self._poll_task is not None:
            # One worker follows the repository and tells the others when to look:
            # their scans then see the same files at (nearly) the same moment.
            self._poll_task.cancel()
            self._poll_task = None
            if self.topology.index == 0:
                self._poll_everywhere = asyncio.create_task(self._poll_loop(), name="naiad-poller")
        self._control = ControlServer(socket_path(self.topology.directory, self.topology.index), self._handlers())
        self._control.start()
        if self.topology.restarted:
            await self._rejoin()

    async def stop(self) -> None:
        if self._poll_everywhere is not None:
            self._poll_everywhere.cancel()
            await asyncio.gather(self._poll_everywhere, return_exceptions=True)
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
        for peer in self._peers:
            peer.close()
        await super().stop()

    async def _rejoin(self) -> None:
        """A restarted worker takes on what clients changed since start-up, before it serves."""
        try:
            entries = await asyncio.to_thread(self._peers[0].call, "journal")
        except NaiadError as exc:
            log.error("worker %d could not read worker 0's journal: %s", self.topology.index, exc.message)
            return
        for operation, arguments in entries:
            try:
                await self._apply_here(operation, arguments)
            except NaiadError as exc:
                log.error("worker %d could not replay %s: %s", self.topology.index, operation, exc.message)
        log.info("worker %d replayed %d change(s) clients made since start-up", self.topology.index, len(entries))

    # -- what a client changes: here, then on every other worker --------------------------

    async def load_model(
        self, name: str, config: dict[str, Any] | None = None, files: dict[str, bytes] | None = None
    ) -> None:
        await self._everywhere("load", name, config, files)

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        await self._everywhere("unload", name, unload_dependents)

    async def _everywhere(self, operation: str, *arguments: Any) -> None:
        """Apply a long operation here and on every peer at once; return when all applied."""
        here, *there = await asyncio.gather(
            self._apply_here(operation, arguments),
            *(asyncio.to_thread(peer.call, operation, *arguments) for peer in self._peers),
            return_exceptions=True,
        )
        if isinstance(here, BaseException):
            raise here
        _raise_refusals(operation, zip(self._peers, there))

    def _replicate(self, operation: str, *arguments: Any) -> None:
        """Apply a quick operation, already applied here, on every peer (blocking: these
        are answered by the peers' control threads, not their event loops)."""
        self._record(operation, arguments)
        results: list[Any] = []
        for peer in self._peers:
            try:
                results.append(peer.call(operation, *arguments, timeout_s=_QUICK_CALL_S))
            except NaiadError as exc:
                results.append(exc)
        _raise_refusals(operation, zip(self._peers, results))

    def _send_trace(self, path: str, entry: dict[str, Any], frequency: int) -> None:
        try:
            self._peers[0].call("trace_entry", path, entry, frequency, timeout_s=_QUICK_CALL_S)
        except NaiadError as exc:
            log.warning("a trace for %s was lost: %s", path, exc.message)

    # -- what a client reads: the sum of every worker's share -----------------------------

    def statistics(self, name: str = "", version: str = "") -> list[dict[str, Any]]:
        shares = [super().statistics(name, version)]
        for peer in self._peers:
            try:
                shares.append(peer.call("statistics", name, version, timeout_s=_QUICK_CALL_S))
            except NaiadError:
                continue  # restarting, or it does not serve the model (yet)
        return merge_statistics(shares)

    async def gather_metric_families(self, own: list[Family], counter_latencies: bool) -> list[Family]:
        """Worker 0's metric families with every peer's counts added (the metrics frontend
        calls this; only worker 0 serves the metrics port)."""
        shares = await asyncio.gather(
            *(
                asyncio.to_thread(peer.call, "metrics", counter_latencies, timeout_s=_QUICK_CALL_S)
                for peer in self._peers
            ),
            return_exceptions=True,
        )
        return merge_families(own, [share for share in shares if not isinstance(share, BaseException)])

    # -- sequences: every request of one runs on its owner --------------------------------

    async def infer(self, request: InferenceRequest) -> InferenceResponse:
        if "sequence_id" in request.parameters:
            owner = self._remote_owner(request)
            if owner is not None:
                (response,) = restore_responses(await self._forward(owner, "infer", request))
                return response
        return await super().infer(request)

    def infer_stream(self, request: InferenceRequest) -> AsyncIterator[InferenceResponse]:
        if "sequence_id" in request.parameters:
            owner = self._remote_owner(request)
            if owner is not None:
                return self._forwarded_stream(owner, request)
        return super().infer_stream(request)

    async def _forwarded_stream(self, owner: Peer, request: InferenceRequest) -> AsyncIterator[InferenceResponse]:
        # The owner's responses come back together, when the request has finished.
        for response in restore_responses(await self._forward(owner, "infer_stream", request)):
            yield response

    def _remote_owner(self, request: InferenceRequest) -> Peer | None:
        """The peer that owns the request's sequence; None when this worker runs it."""
        correlation_id = request.parameters["sequence_id"]
        if correlation_id in (0, "", None):
            return None
        if not self.model(request.model_name, request.model_version).config.proto.HasField("sequence_batching"):
            return None
        owner = sequence_owner(correlation_id, self.topology.count)
        if owner == self.topology.index:
            return None
        return next(peer for peer in self._peers if peer.index == owner)

    async def _forward(self, owner: Peer, operation: str, request: InferenceRequest) -> Any:
        try:
            return await asyncio.to_thread(owner.call, operation, portable_request(request))
        except PeerUnreachable:
            raise NaiadError.unavailable(
                f"the worker that holds sequence {request.parameters.get('sequence_id')!r} is restarting; its "
                "state is lost: start the sequence again"
            ) from None

    # -- this worker's side of the control plane ------------------------------------------

    def _handlers(self) -> dict[str, Callable[..., Any]]:
        def on_loop(operation: str) -> Callable[..., Any]:
            def handle(*arguments: Any) -> Any:
                work = self._apply_here(operation, arguments)
                return asyncio.run_coroutine_threadsafe(work, self._running_loop()).result()

            return handle

        def here(operation: str) -> Callable[..., Any]:
            def handle(*arguments: Any) -> Any:
                self._apply_quick_here(operation, arguments)

            return handle

        return {
            **{op: on_loop(op) for op in ("load", "unload", "infer", "infer_stream", "poll")},
            **{op: here(op) for op in ("shm_register", "shm_unregister", "trace", "log")},
            "statistics": lambda name, version: _read(lambda: Server.statistics(self, name, version)),
            "metrics": lambda counter_latencies: _read(lambda: self._own_metric_families(counter_latencies)),
            "journal": self.journal.entries,
            # Worker 0's loop owns its pending trace files; the sender need not wait.
            "trace_entry": lambda path, entry, frequency: self._running_loop().call_soon_threadsafe(
                self.tracing.add_file_entry, path, entry, frequency
            ),
        }

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "the control plane starts after the server"
        return self._loop

    async def _apply_here(self, operation: str, arguments: tuple[Any, ...]) -> Any:
        """Apply one operation in this worker only (for a client, a peer, or a replay)."""
        if operation == "load":
            await Server.load_model(self, *arguments)
        elif operation == "unload":
            await Server.unload_model(self, *arguments)
        elif operation == "infer":
            return portable_responses([await Server.infer(self, *arguments)])
        elif operation == "infer_stream":
            return portable_responses([r async for r in Server.infer_stream(self, *arguments)])
        elif operation == "poll":
            assert self.poller is not None
            await self.poller.poll_once()
            return None
        else:
            self._apply_quick_here(operation, arguments)
            return None
        self._record(operation, arguments)
        return None

    def _apply_quick_here(self, operation: str, arguments: tuple[Any, ...]) -> None:
        if operation == "shm_register":
            self.shared_memory.register_here(*arguments)
        elif operation == "shm_unregister":
            self.shared_memory.unregister_here(*arguments)
        elif operation == "trace":
            self.tracing.update_here(*arguments)
        elif operation == "log":
            self.log_settings.local.update(*arguments)  # type: ignore[attr-defined]
        else:
            raise NaiadError.internal(f"control plane: unknown operation '{operation}'")
        self._record(operation, arguments)

    def _record(self, operation: str, arguments: tuple[Any, ...]) -> None:
        """Keep the latest form of each change for a worker that restarts."""
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

    def _own_metric_families(self, counter_latencies: bool) -> list[Family]:
        return [*model_families(self, counter_latencies), *cache_families(self), *custom_families(self)]

    async def _poll_loop(self) -> None:
        assert self.poller is not None
        while True:
            await asyncio.sleep(self.poller.interval_secs)
            try:
                await self.poller.poll_once()
                await asyncio.gather(
                    *(asyncio.to_thread(peer.call, "poll") for peer in self._peers), return_exceptions=True
                )
            except Exception:  # noqa: BLE001 - one bad scan must not stop polling
                log.exception("repository poll failed")


def _read(read: Callable[[], Any]) -> Any:
    """`read()` from a control thread: the event loop may change a dict it walks meanwhile."""
    for attempt in range(_READ_ATTEMPTS):
        try:
            return read()
        except RuntimeError:
            if attempt + 1 == _READ_ATTEMPTS:
                raise
    return None


def _raise_refusals(operation: str, results: Any) -> None:
    """A worker that refused what this one applied leaves the server incoherent: say so.
    A worker that cannot be reached is restarting and replays the journal when it is back."""
    refusals = [
        (peer.index, result)
        for peer, result in results
        if isinstance(result, BaseException) and not isinstance(result, PeerUnreachable)
    ]
    if not refusals:
        return
    for _, error in refusals:
        if not isinstance(error, NaiadError):
            raise error
    text = "; ".join(f"worker {index}: {error.message}" for index, error in refusals)
    raise NaiadError(refusals[0][1].code, f"{operation} was applied by this worker but refused by {text}")
