"""`WorkerServer`: what every worker process of `naiad serve --workers N` does for the others.

Every worker accepts connections on the shared ports, so state a client changes through one
connection must hold on every other: client shared-memory regions and log settings are
applied in every worker (`replicate`); a change that one process applies for the whole
server (a model load in the model home, a trace setting) is recorded everywhere (`share`).
Each worker keeps a journal of those changes, in their latest form; worker 0's is the one a
process started again after a crash replays before it serves.

The two kinds of worker build on it: `FrontDoor` (front_door.py: its requests run in the
model home) and `ModelHome` (model_home.py: the one worker where the models live).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..errors import NaiadError
from ..server import Server, ServerOptions
from .control_plane import ControlServer, Peer, PeerUnreachable, socket_path
from .journal import Entry, Journal
from .replicated import ReplicatedLogSettings, ReplicatedSharedMemory
from .topology import Topology

__all__ = ["WorkerServer", "QUICK_CALL_S"]

log = logging.getLogger("naiad.workers")

# How long the event loop may wait for another process's answer to a quick call (statistics,
# readiness, a shared-memory registration); one that takes longer is left out, as one
# restarting is.
QUICK_CALL_S = 5.0
# The changes applied in every worker; the others are applied in one process and recorded.
_APPLIED_EVERYWHERE = ("shm_register", "shm_unregister", "cuda_shm_register", "cuda_shm_unregister", "log")
_RECORDED = ("load", "unload", "trace")


class WorkerServer(Server):
    def __init__(self, options: ServerOptions, topology: Topology) -> None:
        super().__init__(options)
        self.topology = topology
        self.journal = Journal()
        self.shared_memory: ReplicatedSharedMemory = ReplicatedSharedMemory(
            self.options.allow_client_shm, self.replicate
        )
        self.log_settings = ReplicatedLogSettings(self.log_settings, self.replicate)  # type: ignore[assignment]
        self.peers = [Peer(i, socket_path(topology.directory, i)) for i in range(topology.count) if i != topology.index]
        self._control: ControlServer | None = None
        self._settings_changes: dict[tuple[str, str], dict[str, Any]] = {}
        # One thread tells the other workers of shared changes, so they arrive in their order.
        self._sharing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="naiad-share")

    def listen_for_peers(self, extra: dict[str, Callable[..., Any]] | None = None) -> None:
        """Answer the other processes on this worker's control socket (`extra`: what a kind of
        worker answers besides the changes every worker takes)."""

        def here(operation: str) -> Callable[..., Any]:
            def handle(*arguments: Any) -> None:
                self.apply_here(operation, arguments)

            return handle

        handlers = {op: here(op) for op in (*_APPLIED_EVERYWHERE, *_RECORDED)}
        handlers["journal"] = self.journal.entries
        self._control = ControlServer(
            socket_path(self.topology.directory, self.topology.index), {**handlers, **(extra or {})}
        )
        self._control.start()

    async def journal_of_worker_0(self) -> list[Entry]:
        """What clients changed since start-up, for a process started again; [] when worker 0
        does not answer."""
        worker_0 = next(peer for peer in self.peers if peer.index == 0)
        try:
            entries: list[Entry] = await asyncio.to_thread(worker_0.call, "journal")
        except NaiadError as exc:
            log.error("%s could not read worker 0's journal: %s", self.label, exc.message)
            return []
        return entries

    @property
    def process_count(self) -> int:
        return self.topology.count

    @property
    def label(self) -> str:
        return "the model home" if self.topology.home else f"worker {self.topology.index}"

    async def stop(self) -> None:
        if self._control is not None:
            self._control.close()
            # The last worker out removes the socket directory (a killed worker leaves its
            # socket behind, and worker 0 killed cannot clean up).
            for peer in self.peers:
                if not peer.listening():
                    with contextlib.suppress(OSError):
                        os.unlink(peer.path)
            with contextlib.suppress(OSError):
                os.rmdir(self.topology.directory)
        self._sharing.shutdown(wait=False, cancel_futures=True)
        for peer in self.peers:
            peer.close()
        await super().stop()

    # -- changes clients make -------------------------------------------------------------------

    def replicate(self, operation: str, *arguments: Any) -> None:
        """Apply a change, already applied here, in every other worker (blocking: their
        control threads answer); raises when one refused it."""
        self.record(operation, arguments)
        results: list[Any] = []
        for peer in self.peers:
            try:
                results.append(peer.call(operation, *arguments, timeout_s=QUICK_CALL_S))
            except NaiadError as exc:
                results.append(exc)
        _raise_refusals(operation, zip(self.peers, results))

    def share(self, operation: str, *arguments: Any) -> Future[None]:
        """Record in every worker's journal a change this process applied for the server; done
        once the others hold it. They are told from a thread: a worker that does not answer (a
        stopped process holds each call for QUICK_CALL_S) delays the change's answer, not the
        requests this process's event loop serves meanwhile."""
        self.record(operation, arguments)
        return self._sharing.submit(self._tell_peers, operation, arguments)

    def _tell_peers(self, operation: str, arguments: tuple[Any, ...]) -> None:
        for peer in self.peers:
            with contextlib.suppress(NaiadError):
                peer.call(operation, *arguments, timeout_s=QUICK_CALL_S)

    def apply_here(self, operation: str, arguments: tuple[Any, ...]) -> None:
        """A change another worker made: applied here when every worker holds it, else
        only recorded."""
        if operation == "shm_register":
            self.shared_memory.register_here(*arguments)
        elif operation == "shm_unregister":
            self.shared_memory.unregister_here(*arguments)
        elif operation == "cuda_shm_register":
            self.shared_memory.register_cuda_here(*arguments)
        elif operation == "cuda_shm_unregister":
            self.shared_memory.unregister_cuda_here(*arguments)
        elif operation == "log":
            self.log_settings.local.update(*arguments)  # type: ignore[attr-defined]
        elif operation not in _RECORDED:
            raise NaiadError.internal(f"control plane: unknown operation '{operation}'")
        self.record(operation, arguments)

    def record(self, operation: str, arguments: tuple[Any, ...]) -> None:
        """Keep the latest form of each change for a process that is started again."""
        if operation in ("load", "unload"):
            self.journal.record(("model", arguments[0]), operation, *arguments)
        elif operation in ("shm_register", "cuda_shm_register"):
            self.journal.record((operation, arguments[0]), operation, *arguments)
        elif operation in ("shm_unregister", "cuda_shm_unregister"):
            name, kind = arguments[0], operation.replace("unregister", "register")
            self.journal.forget(lambda key: key[0] == kind and (name is None or key[1] == name))
        elif operation in ("trace", "log"):
            # Settings accumulate: the journal keeps every key set so far, per model.
            model = arguments[1] if operation == "trace" else ""
            changes = self._settings_changes.setdefault((operation, model), {})
            changes.update(arguments[0])
            self.journal.record((operation, model), operation, dict(changes), *arguments[1:])


def _raise_refusals(operation: str, results: Any) -> None:
    """A worker that refused what this one applied leaves the server incoherent: say so.
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
