"""`StubConnection`: the server's side of one model process.

Starting it (blocking, in a worker thread) starts the model's process (forked from the stub
template, stub_forker.py, or a fresh interpreter), hands it the socket and the two rings, and
waits for `initialize` to finish. After that the connection lives on
the server's event loop: a protocol decodes what the stub sends (execute results, decoupled
responses, BLS requests, cancellation queries, log lines) in `data_received` and routes it,
so a result resumes the `execute` awaiting it with no thread hop and no task in between. When the process dies, every request still
waiting on it gets an error at once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import socket
import subprocess
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from naiad.backend import InferenceRequest as CoreRequest
from naiad.backend import InferenceResponse as CoreResponse
from naiad.backend import NaiadError
from naiad_wire.interprocess.messages import (
    FRAME_HEADER,
    FrameReader,
    decode_array,
    encode_array,
    pack_frame,
    pack_placing,
    plain_parameters,
    unpack_message,
)
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd, remove_segments_of

from .bls_runner import BlsCall, cancelled_response, run_bls
from .conversions import FINAL_MARKER, core_response_from_parts
from .forked_process import StubProcess, describe_exit
from .metric_owner import METRIC_OPS, MetricOwner
from .model_control import manage_model
from .settings import ModelSettings
from .stub_forker import StubForker

if TYPE_CHECKING:
    from naiad.backend import InferenceService as Server

__all__ = ["StubConnection", "StubLaunch", "describe_exit"]

log = logging.getLogger("naiad.backends.python")

_LOG_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.DEBUG}


@dataclass
class StubLaunch:
    """Everything needed to start one model process."""

    label: str  # "model 'x' instance 'x_0_0'", for messages
    model_file: Path
    args: dict[str, str]
    decoupled: bool
    settings: ModelSettings
    python_path: str  # directory holding naiad_backend_python for the stub's interpreter
    server: Server | None
    cwd: Path = field(default_factory=Path.cwd)
    # The server's stub template, when the model's process may be forked from it.
    forker: StubForker | None = None


# Starts the stub with these descriptors (each with the flag that names it) and environment;
# None when it cannot, and the caller tries another way.
_ProcessStart = Callable[[StubLaunch, dict[str, str], Sequence[tuple[str, int]]], StubProcess | None]


def _stub_environment(launch: StubLaunch) -> dict[str, str]:
    settings = launch.settings
    env = dict(os.environ)
    env["PYTHONPATH"] = launch.python_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if settings.env_dir is not None:
        env["VIRTUAL_ENV"] = str(settings.env_dir)
        env["PATH"] = f"{settings.env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["LD_LIBRARY_PATH"] = f"{settings.env_dir / 'lib'}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
        env.pop("PYTHONHOME", None)
    return env


def _fork(launch: StubLaunch, env: dict[str, str], fds: Sequence[tuple[str, int]]) -> StubProcess | None:
    """From the stub template, sharing what it imported; None when it cannot (logged)."""
    assert launch.forker is not None
    return launch.forker.start(fds, env, str(launch.cwd), launch.label)


def _spawn(launch: StubLaunch, env: dict[str, str], fds: Sequence[tuple[str, int]]) -> StubProcess:
    """A fresh interpreter: the model's own (EXECUTION_ENV_PATH) or the server's."""
    python = launch.settings.python
    command = [python, "-m", "naiad_backend_python.model_side.stub", *(str(part) for pair in fds for part in pair)]
    try:
        return subprocess.Popen(
            command,
            pass_fds=tuple(fd for _, fd in fds),
            env=env,
            stdin=subprocess.DEVNULL,
            cwd=str(launch.cwd),
        )
    except OSError as exc:
        raise NaiadError.unavailable(f"{launch.label}: cannot start '{python}': {exc}") from None


class StubConnection:
    def __init__(
        self,
        launch: StubLaunch,
        process: StubProcess,
        sock: socket.socket,
        to_stub: RingWriter,
        from_stub: RingReader,
    ) -> None:
        self.launch = launch
        self.process = process
        self.sock = sock
        self.to_stub = to_stub
        self.from_stub = from_stub
        self.loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.Transport | None = None
        self._gone: asyncio.Task[None] | None = None  # runs _after_exit once the socket closes
        self._cleaned_up: asyncio.Event | None = None  # set when _after_exit has run
        self._ids = itertools.count(1)
        # execute id -> future of the stub's "result" message
        self.calls: dict[int, asyncio.Future[dict[str, Any]]] = {}
        # request key -> core request, while the stub may still ask about it or answer it
        self.requests: dict[int, CoreRequest] = {}
        self.decoupled_keys: set[int] = set()
        # query id -> the task serving a query of the model (BLS, model loading); by id, so
        # the model can cancel a BLS stream.
        self._query_tasks: dict[int, asyncio.Task[None]] = {}
        self.closed = False
        # False once the server has killed (or is finalizing) the process: new work must
        # wait for the replacement even before the socket reports the exit.
        self.accepting = True
        # Why the process is going away, when the server decided it (timeout, unload).
        self.exit_reason: str | None = None
        self.on_exit: Callable[[StubConnection], None] | None = None
        self._finalized: asyncio.Event | None = None  # created on the loop, in attach
        # The custom metrics this process's model created; released when the process goes.
        self.metrics = MetricOwner(launch.server.custom_metrics if launch.server is not None else None, launch.label)

    # -- start-up (worker thread) ----------------------------------------------------------

    @classmethod
    def start(cls, launch: StubLaunch) -> StubConnection:
        connection = None
        if launch.forker is not None:
            connection = cls._started(launch, _fork)
        if connection is None:
            connection = cls._started(launch, _spawn)
        assert connection is not None  # _spawn raises rather than answer None
        try:
            connection._handshake()
        except BaseException:
            connection.kill()
            connection._close_resources()
            raise
        return connection

    @classmethod
    def _started(cls, launch: StubLaunch, start: _ProcessStart) -> StubConnection | None:
        """A process started by `start` with a new socket and rings; None when `start` could
        not (and the socket and rings are closed)."""
        settings = launch.settings
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        to_fd = create_ring_fd(settings.ring_bytes)
        from_fd = create_ring_fd(settings.ring_bytes)
        fds = (("--socket-fd", child.fileno()), ("--inbound-fd", to_fd), ("--outbound-fd", from_fd))
        process: StubProcess | None = None
        try:
            process = start(launch, _stub_environment(launch), fds)
        finally:
            # The process has its own copies now; the server keeps only its end of the socket.
            child.close()
            if process is None:
                parent.close()
                os.close(to_fd)
                os.close(from_fd)
        if process is None:
            return None
        try:
            return cls(launch, process, parent, RingWriter(to_fd), RingReader(from_fd))
        finally:
            os.close(to_fd)
            os.close(from_fd)

    def _handshake(self) -> None:
        """Send `init` and wait (blocking) until the model's initialize has run."""
        launch = self.launch
        self.sock.settimeout(launch.settings.start_timeout_s or None)
        self.sock.sendall(
            pack_frame(
                {
                    "op": "init",
                    "model_file": str(launch.model_file),
                    "args": launch.args,
                    "decoupled": launch.decoupled,
                    "label": launch.label,
                }
            )
        )
        while True:
            try:
                message = self._receive_blocking()
            except TimeoutError:
                raise NaiadError.unavailable(
                    f"{launch.label}: the model did not finish initialize within {launch.settings.start_timeout_s:g} s"
                ) from None
            if message is None:
                code = self.process.wait()
                raise NaiadError.unavailable(
                    f"{launch.label}: the model's process ended during initialize ({describe_exit(code)})"
                )
            op = message["op"]
            if op == "ready":
                break
            if op == "init_error":
                log.error("%s: initialize failed:\n%s", launch.label, message.get("traceback", ""))
                raise NaiadError.unavailable(f"{launch.label}: initialize failed: {message['message']}")
            if op == "log":
                self._log(message)
            elif op == "bls":
                # Serving BLS needs the event loop; initialize runs before it is attached.
                self.from_stub.consumed(message.get("mark"))
                self.sock.sendall(
                    pack_frame(
                        {
                            "op": "bls_response",
                            "qid": message["qid"],
                            "final": True,
                            "response": ([], ("UNAVAILABLE", "BLS requests are not available during initialize"), {}),
                        }
                    )
                )
            elif op == "is_cancelled":
                self.sock.sendall(pack_frame({"op": "cancelled", "qid": message["qid"], "value": False}))
            elif op == "model_control":
                # As BLS: serving it needs the event loop, not attached yet.
                self.sock.sendall(
                    pack_frame(
                        {
                            "op": "control_reply",
                            "qid": message["qid"],
                            "error": "the model loading API is not available during initialize",
                        }
                    )
                )
            elif op in METRIC_OPS:
                # Models create their metric families in initialize.
                self._serve_metric_blocking(message)
        self.sock.settimeout(None)
        self.sock.setblocking(False)

    def _serve_metric_blocking(self, message: dict[str, Any]) -> None:
        reply = self.metrics.serve(message)
        if reply is not None:
            self.sock.sendall(pack_frame(reply))

    def _receive_blocking(self) -> dict[str, Any] | None:
        header = self._read_exactly(FRAME_HEADER.size)
        if header is None:
            return None
        body = self._read_exactly(FRAME_HEADER.unpack(header)[0])
        return None if body is None else unpack_message(body)

    def _read_exactly(self, size: int) -> bytes | None:
        chunks = []
        while size:
            chunk = self.sock.recv(size)
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    # -- on the event loop ---------------------------------------------------------------

    async def attach(self) -> None:
        if self._transport is not None:
            return
        self.loop = asyncio.get_running_loop()
        self._finalized = asyncio.Event()
        self._cleaned_up = asyncio.Event()
        self._transport, _ = await self.loop.create_unix_connection(lambda: _StubProtocol(self), sock=self.sock)

    @property
    def attached(self) -> bool:
        return self._transport is not None

    def send(self, message: dict[str, Any]) -> None:
        if self.closed or self._transport is None:
            return
        self._transport.write(pack_frame(message))

    def send_with(self, build: Callable[[RingWriter], dict[str, Any]]) -> None:
        """Place tensors and send the message with no await in between, so ring order
        is socket order."""
        if self.closed or self._transport is None:
            raise NaiadError.unavailable(f"{self.launch.label}: the model's process is not running")
        self._transport.write(pack_placing(build, self.to_stub))

    def new_id(self) -> int:
        return next(self._ids)

    def _lost(self) -> None:
        """The socket closed (the process exited, or sent something unreadable)."""
        if self._gone is None:
            self._gone = asyncio.ensure_future(self._after_exit())

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message["op"]
        if op == "result":
            if "responses" in message and message["responses"] is not None:
                message["responses"] = [self._decode_response(r) for r in message["responses"]]
            self.from_stub.consumed(message.get("mark"))
            future = self.calls.pop(message["id"], None)
            if future is not None and not future.done():
                future.set_result(message)
        elif op == "respond":
            response = self._decode_response(message.get("response"))
            self.from_stub.consumed(message.get("mark"))
            self._respond(message["key"], response, bool(message.get("final")))
        elif op == "is_cancelled":
            request = self.requests.get(message["key"])
            self.send({"op": "cancelled", "qid": message["qid"], "value": bool(request and request.cancelled)})
        elif op == "bls":
            data = message["request"]
            inputs = [decode_array(self.from_stub, d) for d in data["inputs"]]
            self.from_stub.consumed(message.get("mark"))
            call = BlsCall(
                data["model_name"],
                data["model_version"],
                inputs,
                data["requested_output_names"],
                data["request_id"],
                data["correlation_id"],
                data["flags"],
                data["timeout"],
                data["parameters"],
            )
            self._serve_query(message["qid"], self._serve_bls(message["qid"], call, bool(message.get("decoupled"))))
        elif op == "bls_cancel":
            cancelled = self._query_tasks.get(message["qid"])
            if cancelled is not None:
                cancelled.cancel()
        elif op == "model_control":
            self._serve_query(message["qid"], self._serve_model_control(message))
        elif op == "log":
            self._log(message)
        elif op in METRIC_OPS:
            reply = self.metrics.serve(message)
            if reply is not None:
                self.send(reply)
        elif op == "finalized" and self._finalized is not None:
            self._finalized.set()

    def _decode_response(self, data: tuple[Any, ...] | None) -> CoreResponse | None:
        """A response as the stub sends it: ``(outputs, error, parameters)``."""
        if data is None:
            return None
        outputs, error, parameters = data
        return core_response_from_parts([decode_array(self.from_stub, d) for d in outputs], error, parameters)

    def _respond(self, key: int, response: CoreResponse | None, final: bool) -> None:
        request = self.requests.get(key)
        if request is None or request.response_sender is None:
            return
        if final:
            self.requests.pop(key, None)
            self.decoupled_keys.discard(key)
        request.response_sender(response, final)

    def _serve_query(self, qid: int, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._query_tasks[qid] = task
        task.add_done_callback(lambda _: self._query_tasks.pop(qid, None))

    async def _serve_bls(self, qid: int, call: BlsCall, decoupled: bool) -> None:
        try:
            async for response in run_bls(self.launch.server, call, decoupled):
                if not self._send_bls_response(qid, response):
                    return
        except asyncio.CancelledError:
            if self.closed:
                raise
            # The model cancelled the stream (bls_cancel): leaving run_bls cancelled the call.
            self._send_bls_response(qid, cancelled_response())

    def _send_bls_response(self, qid: int, response: CoreResponse) -> bool:
        """Send one BLS response to the model; False once the process is gone."""
        if self.closed:
            return False
        final = response.final
        bare = final and not response.outputs and response.error is None and FINAL_MARKER in response.parameters
        try:
            self.send_with(
                lambda ring: {
                    "op": "bls_response",
                    "qid": qid,
                    "final": final,
                    "response": None if bare else _encode_core_response(ring, response),
                }
            )
        except NaiadError:
            return False
        return True

    async def _serve_model_control(self, message: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"op": "control_reply", "qid": message["qid"]}
        try:
            reply["value"] = await manage_model(self.launch.server, message["action"], message["arguments"])
        except NaiadError as exc:
            reply["error"] = exc.message
        self.send(reply)

    def _log(self, message: dict[str, Any]) -> None:
        log.log(
            _LOG_LEVELS.get(message.get("level", 0), logging.INFO),
            "%s: %s",
            self.launch.label,
            message.get("message", ""),
        )

    # -- shutdown ------------------------------------------------------------------------

    async def _after_exit(self) -> None:
        """The socket closed: collect the exit status and fail whatever still waits."""
        if not self.closed:
            self.closed = True
            try:
                code = await asyncio.to_thread(self.process.wait, 10)
            except subprocess.TimeoutExpired:
                self.kill()
                code = await asyncio.to_thread(self.process.wait)
            reason = self.exit_reason or (
                f"{self.launch.label}: the model's process exited unexpectedly ({describe_exit(code)}); "
                "it is being restarted"
            )
            if self.exit_reason is None:
                log.error("%s", reason)
            error = NaiadError.internal(reason)
            for future in self.calls.values():
                if not future.done():
                    future.set_exception(error)
            self.calls.clear()
            for key in list(self.decoupled_keys):
                self._respond(key, CoreResponse(error=error), True)
            self.requests.clear()
            for task in list(self._query_tasks.values()):
                task.cancel()
            if self._transport is not None:
                self._transport.close()
            self._close_resources()
            if self.on_exit is not None:
                self.on_exit(self)
        if self._cleaned_up is not None:
            self._cleaned_up.set()

    def kill(self) -> None:
        self.accepting = False
        if self.process.poll() is None:
            try:
                self.process.kill()
            except ProcessLookupError:
                pass

    async def finalize(self, timeout: float) -> None:
        """Ask the model to finalize and exit; kill it if it takes longer than `timeout`."""
        self.exit_reason = f"{self.launch.label}: the model was unloaded"
        self.accepting = False
        if not self.closed:
            self.send({"op": "finalize"})
            assert self._finalized is not None
            try:
                await asyncio.wait_for(self._finalized.wait(), timeout)
            except TimeoutError:
                log.warning("%s: finalize did not finish within %g s; killing the process", self.launch.label, timeout)
            try:
                await asyncio.wait_for(asyncio.to_thread(self.process.wait), 5)
            except TimeoutError:
                self.kill()
        if self._cleaned_up is not None:
            try:
                await asyncio.wait_for(self._cleaned_up.wait(), 15)
            except TimeoutError:
                log.warning("%s: the model's socket stayed open after its process ended", self.launch.label)

    def finalize_blocking(self, timeout: float) -> None:
        """Finalize a process that was never attached to an event loop."""
        self.exit_reason = f"{self.launch.label}: the model was unloaded"
        try:
            self.sock.setblocking(True)
            self.sock.settimeout(timeout)
            self.sock.sendall(pack_frame({"op": "finalize"}))
            while True:
                message = self._receive_blocking()
                if message is None or message["op"] == "finalized":
                    break
                if message["op"] == "log":
                    self._log(message)
                elif message["op"] in METRIC_OPS:
                    self._serve_metric_blocking(message)
        except OSError:
            pass
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.wait()
        self.closed = True
        self._close_resources()

    def _close_resources(self) -> None:
        # What the model created goes with its process (a restarted one creates it afresh).
        self.metrics.release_all()
        if self.process.poll() is not None:
            remove_segments_of(self.process.pid)
        try:
            self.sock.close()
        except OSError:
            pass
        self.to_stub.close()
        self.from_stub.close()


class _StubProtocol(asyncio.Protocol):
    """Reads what the stub sends on the server's loop: each complete message is dispatched
    from `data_received` itself, so a result resumes its `execute` with no task in between."""

    def __init__(self, connection: StubConnection) -> None:
        self._connection = connection
        self._frames = FrameReader()

    def data_received(self, data: bytes) -> None:
        connection = self._connection
        try:
            for body in self._frames.feed(data):
                connection._dispatch(unpack_message(body))
        except Exception:  # noqa: BLE001 - a garbled message: drop this process, keep serving
            log.exception("%s: bad message from the model's process", connection.launch.label)
            if connection._transport is not None:
                connection._transport.close()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._connection._lost()


def _encode_core_response(ring: RingWriter, response: CoreResponse) -> tuple[Any, ...]:
    """A BLS response as the stub's decode_response reads it: ``(outputs, error, parameters)``."""
    return (
        [encode_array(ring, t.name, t.datatype, t.data) for t in response.outputs],
        None if response.error is None else (response.error.code.name, response.error.message),
        plain_parameters({k: v for k, v in response.parameters.items() if k != FINAL_MARKER}),
    )
