"""The model home: the one worker of `naiad serve --workers N` where the models live.

Every model version, its scheduler (one queue), its instances, the response cache, the rate
limiter, sequences and statistics exist here once, whatever N is. The model home serves its
own connections like any worker; the other workers are front doors that decode the
protocols and hand each request over. Each front door holds one connection here
(home_link.py says what travels on it); this side runs each request through the in-process
`Server`, as a request of its own would run, and answers on the same connection.

Beside the connections, the model home answers the front doors' quick questions (statistics,
the status page's figures, readiness, the repository index, trace settings) on its control-plane socket, from threads
of its own, so a question never waits for a busy event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Coroutine
from typing import Any, cast

from naiad_wire.interprocess.coalesced_writes import CoalescedWrites
from naiad_wire.interprocess.messages import FrameReader, pack_frame, unpack_message
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter

from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..observability.tracing import Tracing
from ..server import Server, ServerOptions
from .home_link import receive_hello
from .model_mirror import model_table
from .replicated import SharedTracing
from .request_messages import pack_error, pack_response, unpack_request
from .table_confirmations import TableConfirmations
from .topology import Topology
from .worker_server import WorkerServer

__all__ = ["ModelHome"]

log = logging.getLogger("naiad.workers")

# A front door that connects sends its hello at once; one that does not is dropped.
_HELLO_TIMEOUT_S = 5.0
# A forwarded read races with the event loop changing what it walks: read again.
_READ_ATTEMPTS = 3


class ModelHome(WorkerServer):
    """The worker where the models live: the in-process server, serving its own connections
    and every front door's."""

    def __init__(self, options: ServerOptions, topology: Topology) -> None:
        super().__init__(options, topology)
        self.tracing: SharedTracing = SharedTracing(self.options.trace_settings, self.share)
        self._links: set[_FrontDoorConnection] = set()
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._table_due = False
        self.tables = TableConfirmations(self._links)
        # The workers listen before the models are loaded, so one may take connections it
        # cannot answer yet: the server is ready only once worker 0 has seen every worker
        # serve (a model home started again joins workers that serve already).
        self._workers_serve = topology.restarted

    async def start(self) -> None:
        """Load the models, take on what clients changed (when started again), then listen
        for the front doors. Their questions are answered from the start: while the models
        load, the server is not ready and the repository index shows them loading."""
        self._loop = asyncio.get_running_loop()
        self.listen_for_peers(self._questions())
        await super().start()
        if self.topology.restarted:
            await self._rejoin()
        models = self.models
        assert models is not None
        models.on_change = self._table_changed
        path = self.topology.home_path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # left by a model home that was killed
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._accepting = asyncio.create_task(self._accept(listener), name="naiad-model-home")

    def is_ready(self) -> bool:
        return self._workers_serve and super().is_ready()

    async def stop(self) -> None:
        # Worker 0 stops the model home last, once the front doors have finished their requests.
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()
            with contextlib.suppress(OSError):
                os.unlink(self.topology.home_path)
        for link in list(self._links):
            link.close()
        await super().stop()

    async def _rejoin(self) -> None:
        """Started again after a crash: take on what clients changed since start-up, as
        worker 0's journal holds it."""
        entries = await self.journal_of_worker_0()
        for operation, arguments in entries:
            try:
                if operation == "load":
                    await Server.load_model(self, *arguments)
                elif operation == "unload":
                    await Server.unload_model(self, *arguments)
                elif operation == "trace":
                    Tracing.update(self.tracing, *arguments)
                else:
                    self.apply_here(operation, arguments)
            except NaiadError as exc:
                log.error("the model home could not replay %s: %s", operation, exc.message)
        log.info("the model home replayed %d change(s) clients made since start-up", len(entries))

    # -- model control: applied here, recorded in every worker's journal, answered once every
    # front door's table shows it (table_confirmations.py) ------------------------------------

    async def load_model(
        self, name: str, config: dict[str, Any] | None = None, files: dict[str, bytes] | None = None
    ) -> None:
        try:
            await super().load_model(name, config, files)
            await asyncio.wrap_future(self.share("load", name, config, files))
        finally:
            await self.front_doors_see_the_change()

    async def unload_model(self, name: str, unload_dependents: bool = False) -> None:
        try:
            await super().unload_model(name, unload_dependents)
            await asyncio.wrap_future(self.share("unload", name, unload_dependents))
        finally:
            await self.front_doors_see_the_change()

    # -- the front doors ------------------------------------------------------------------------

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            sock, _ = await loop.sock_accept(listener)
            try:
                sock.settimeout(_HELLO_TIMEOUT_S)
                index, (requests_fd, responses_fd) = await loop.run_in_executor(None, receive_hello, sock)
                sock.setblocking(False)
            except (OSError, ValueError) as exc:
                log.warning("a connection to the model home sent no hello (%s); closed", exc)
                sock.close()
                continue
            try:
                connection = _FrontDoorConnection(self, index, RingReader(requests_fd), RingWriter(responses_fd))
            finally:
                os.close(requests_fd)
                os.close(responses_fd)
            await loop.connect_accepted_socket(lambda connection=connection: connection, sock)  # type: ignore[misc]

    def _table_changed(self) -> None:
        """Models load and unload in parallel: send the table once per turn of the loop."""
        if not self._table_due and self._loop is not None:
            self._table_due = True
            self._loop.call_soon(self.send_table)

    def send_table(self) -> int:
        """The current table, to every front door (at once, when a change is pending); its number."""
        self._table_due = False
        self.tables.next_number()
        frame = self.table_frame()
        for link in self._links:
            link.write(frame)
        return self.tables.number

    def table_frame(self) -> bytes:
        assert self.models is not None
        return pack_frame({"op": "models", "table": model_table(self.models), "number": self.tables.number})

    async def front_doors_see_the_change(self) -> None:
        await self.tables.wait_for(self.send_table())

    def _questions(self) -> dict[str, Callable[..., Any]]:
        """What the front doors ask on the control plane, answered from its threads."""
        return {
            "statistics": lambda name, version: _read(lambda: self.statistics(name, version)),
            "status": lambda: _read(self.status),
            "index": lambda ready_only: _read(lambda: self.repository_index(ready_only)),
            "ready": lambda: _read(self.is_ready),
            "workers_serve": self._every_worker_serves,
            "model_ready": lambda name, version: _read(lambda: self.model_ready(name, version)),
            "trace_get": lambda model: _read(lambda: self.tracing.get(model)),
            "trace_update": lambda changes, model: self._on_loop(self.tracing.change(changes, model)),
        }

    def _every_worker_serves(self) -> None:
        """Worker 0 has seen every worker serve: from now on readiness is the models'."""
        self._workers_serve = True

    def _on_loop(self, work: Coroutine[Any, Any, Any]) -> Any:
        """Run `work` on the event loop (what it changes, the loop reads), from a control
        thread that waits for its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()


class _FrontDoorConnection(asyncio.Protocol):
    """The model home's side of one front door's connection."""

    def __init__(self, home: ModelHome, index: int, requests: RingReader, responses: RingWriter) -> None:
        self._home = home
        self.index = index
        self._requests = requests
        self._responses = responses
        self._frames = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._out: CoalescedWrites | None = None
        # key -> what cancels the request (a cancel from the front door, or its going away)
        self._cancels: dict[int, Callable[[], None]] = {}
        # The number of the last model table this front door confirmed it applied.
        self.applied = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not a check: uvloop's transports do not subclass asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)
        self._out = CoalescedWrites(self._transport, asyncio.get_running_loop())
        self._home._links.add(self)
        self.write(self._home.table_frame())

    def write(self, frame: bytes) -> None:
        if self._out is not None:
            self._out.write(frame)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._out = None
        self._home._links.discard(self)
        self._home.tables.changed()
        for cancel in list(self._cancels.values()):
            cancel()
        self._cancels.clear()
        self._requests.close()
        self._responses.close()

    def data_received(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            try:
                self._dispatch(unpack_message(body))
            except Exception:  # noqa: BLE001 - one bad message must not stop the others
                log.exception("a message from front door %d could not be read", self.index)

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message["op"]
        if op == "table_applied":
            self.applied = max(self.applied, message["number"])
            self._home.tables.changed()
            return
        key = message["key"]
        if op == "infer":
            try:
                request = unpack_request(message, self._requests, self._home.shared_memory.cuda)
            except Exception as exc:  # noqa: BLE001 - the request fails, not the link
                log.exception("a request from front door %d could not be read", self.index)
                self._send_error(
                    key, NaiadError.internal(f"the model home could not read the request: {type(exc).__name__}: {exc}")
                )
                return
            finally:
                self._requests.consumed(message.get("mark"))
            if message.get("stream"):
                self._track(key, self._stream(key, request))
            else:
                self._infer(key, request)
        elif op == "cancel":
            cancel = self._cancels.pop(key, None)
            if cancel is not None:
                cancel()
        elif op == "control":
            self._track(key, self._control(key, message["operation"], message["arguments"]))

    def _infer(self, key: int, request: InferenceRequest) -> None:
        """A request with one response, answered from the scheduler's callback."""

        def done(answer: InferenceResponse | NaiadError) -> None:
            if self._cancels.pop(key, None) is None:
                return  # cancelled by the front door, or it went away
            if isinstance(answer, NaiadError):
                self._send_error(key, answer)
            else:
                self._send_response(key, answer)

        try:
            cancel = self._home.start_infer(request, done)
        except NaiadError as exc:
            self._send_error(key, exc)
            return
        if cancel is None:  # a decoupled model: its one response comes through its stream
            self._track(key, self._answer(key, request))
        else:
            self._cancels[key] = cancel

    def _track(self, key: int, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._cancels[key] = task.cancel
        task.add_done_callback(lambda _: self._cancels.pop(key, None))

    async def _answer(self, key: int, request: InferenceRequest) -> None:
        try:
            response = await self._home.infer(request)
        except NaiadError as exc:
            self._send_error(key, exc)
            return
        except Exception as exc:  # noqa: BLE001 - the front door gets the failure, the home keeps serving
            log.exception("an inference request failed in the model home")
            self._send_error(key, NaiadError.unexpected(exc))
            return
        self._send_response(key, response)

    async def _stream(self, key: int, request: InferenceRequest) -> None:
        try:
            async for response in self._home.infer_stream(request):
                self._send_response(key, response)
        except NaiadError as exc:
            self._send_error(key, exc)
        except Exception as exc:  # noqa: BLE001
            log.exception("a streamed inference request failed in the model home")
            self._send_error(key, NaiadError.unexpected(exc))

    def _send_response(self, key: int, response: InferenceResponse) -> None:
        if self._out is None:
            return
        with self._responses.lock:
            self._out.write(pack_response(key, response, self._responses))

    def _send_error(self, key: int, error: NaiadError) -> None:
        self.write(pack_frame({"op": "error", "key": key, "error": pack_error(error)}))

    async def _control(self, key: int, operation: str, arguments: tuple[Any, ...]) -> None:
        error = None
        try:
            if operation == "load":
                await self._home.load_model(*arguments)
            elif operation == "unload":
                await self._home.unload_model(*arguments)
            else:
                raise NaiadError.internal(f"the model home has no operation '{operation}'")
        except NaiadError as exc:
            error = pack_error(exc)
        except Exception as exc:  # noqa: BLE001
            log.exception("%s failed in the model home", operation)
            error = pack_error(NaiadError.unexpected(exc))
        # After the table (load_model sent it): the front door's copy shows the change first.
        self.write(pack_frame({"op": "answer", "key": key, "error": error}))


def _read(read: Callable[[], Any]) -> Any:
    """`read()` from a control thread: the event loop may change a dict it walks meanwhile."""
    for attempt in range(_READ_ATTEMPTS):
        try:
            return read()
        except RuntimeError:
            if attempt + 1 == _READ_ATTEMPTS:
                raise
    return None
