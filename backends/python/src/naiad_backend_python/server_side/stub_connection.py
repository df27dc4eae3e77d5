"""`StubConnection`: the server's side of one model process.

Starting it (blocking, in a worker thread) starts the model's process (forked from the stub
template, stub_forker.py, or a fresh interpreter), hands it the socket and the two rings, and
waits for `initialize` to finish. After that the connection lives on
the server's event loop: a protocol decodes what the stub sends (execute results, decoupled
responses, BLS requests, cancellation queries, log lines) in `data_received` and routes it,
so a result resumes the `execute` awaiting it with no thread hop and no task in between. When the process dies, every request still
waiting on it gets an error at once.

Every message from the stub (model_side/stub_messages.py) goes through one dispatch table,
whichever reads it: the blocking reads of start-up and of `finalize_blocking`, before the
connection is attached to the loop, or the protocol after. A handler that needs the loop
(BLS, model control) answers "not available" before it is attached.
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
from naiad.backend import Tensor as CoreTensor
from naiad_wire import busy_poll
from naiad_wire.interprocess.messages import (
    FRAME_HEADER,
    FrameReader,
    decode_array,
    encode_array,
    plain_parameters,
)
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter, create_ring_fd, remove_segments_of

from ..model_side.stub_messages import (
    Bls,
    BlsCancel,
    BlsResponse,
    Finalize,
    Finalized,
    Init,
    InitError,
    IsCancelled,
    Log,
    MalformedMessage,
    MetricFamilyDelete,
    MetricFamilyNew,
    MetricNew,
    MetricUpdate,
    MetricValue,
    ModelControl,
    Ready,
    Reply,
    Respond,
    ResponseItem,
    Result,
    StubMessage,
    pack,
    pack_placing,
    unpack,
)
from .bls_runner import BlsCall, cancelled_response, run_bls
from .conversions import FINAL_MARKER, core_response_from_parts
from .forked_process import StubProcess, describe_exit
from .metric_owner import MetricOwner
from .model_control import manage_model
from .settings import ModelSettings
from .stub_forker import StubForker

if TYPE_CHECKING:
    from naiad.backend import CudaPlacement
    from naiad.backend import InferenceService as Server

__all__ = ["StubConnection", "StubLaunch", "ExecuteOutcome", "describe_exit"]

log = logging.getLogger("naiad.backends.python")

_LOG_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.DEBUG}

# What an `execute` awaits: the stub's Result, and its responses decoded into core ones.
ExecuteOutcome = tuple[Result, list[CoreResponse | None] | None]


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
    # Threads for the model process's framework thread pools (torch's, MKL's: OpenMP ones),
    # its share of the server's CPUs; None leaves the frameworks' defaults.
    threads: int | None = None


# Starts the stub with these descriptors (each with the flag that names it) and environment;
# None when it cannot, and the caller tries another way.
_ProcessStart = Callable[[StubLaunch, dict[str, str], Sequence[tuple[str, int]]], StubProcess | None]


# What OpenMP-based pools (torch's intra-op pool, MKL) read for their size when they start.
# onnxruntime and TensorFlow read none of them; a model sizes those itself.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _stub_environment(launch: StubLaunch) -> dict[str, str]:
    settings = launch.settings
    env = dict(os.environ)
    env["PYTHONPATH"] = launch.python_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if launch.threads is not None and not any(variable in env for variable in THREAD_VARIABLES):
        # Every model process's pool would otherwise take every CPU, and OpenMP threads that
        # wait by spinning, one set per process, starve each other: two torch instances of a
        # model.py served 19 images/s where one thread each served 1,255. Either variable set
        # for the server is the operator's choice, and both are then left as they are (torch
        # reads MKL_NUM_THREADS over OMP_NUM_THREADS).
        env.update(dict.fromkeys(THREAD_VARIABLES, str(launch.threads)))
    if launch.args.get("model_instance_kind") == "GPU" and "OMP_WAIT_POLICY" not in env:
        # A GPU instance's host-side work is small (stacking a batch, copies), but after each
        # OpenMP region torch's pool spins for a while by default, one pool per process, on
        # the CPUs where the front doors' loops run: on an H200 a GPU model.py served 137-139
        # images/s over HTTP at one connection with 5.7 CPUs spinning, and 245 with its
        # threads passive. Set for the server, the variable is the operator's choice.
        env["OMP_WAIT_POLICY"] = "PASSIVE"
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
        # execute id -> future of the stub's Result
        self.calls: dict[int, asyncio.Future[ExecuteOutcome]] = {}
        # execute id -> the outputs it lent the stub to write on a GPU, by request index
        # (lent_regions.py), for the Result's outputs written there
        self.lent_outputs: dict[int, dict[int, dict[str, CudaPlacement]]] = {}
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
        # What the stub said about initialize and finalize (Ready, InitError, Finalized).
        self._ready = False
        self._init_error: InitError | None = None
        self._finalized_seen = False
        self._finalized: asyncio.Event | None = None  # created on the loop, in attach
        # The custom metrics this process's model created; released when the process goes.
        self.metrics = MetricOwner(launch.server.custom_metrics if launch.server is not None else None, launch.label)
        # The one table of what each message from the stub does.
        metrics = self.metrics
        self._handlers: dict[type, Callable[[Any], None]] = {
            Result: self._on_result,
            Respond: self._on_respond,
            IsCancelled: self._on_is_cancelled,
            Bls: self._on_bls,
            BlsCancel: self._on_bls_cancel,
            ModelControl: self._on_model_control,
            Log: self._on_log,
            MetricFamilyNew: lambda m: self._answer(m.qid, metrics.family_new, m.handle, m.name, m.description, m.kind),
            MetricNew: lambda m: self._answer(m.qid, metrics.metric_new, m.handle, m.family, m.labels, m.buckets),
            MetricValue: lambda m: self._answer(m.qid, metrics.value, m.handle),
            MetricUpdate: lambda m: self._apply(m, metrics.update, m.handle, m.operation, m.value),
            MetricFamilyDelete: lambda m: self._apply(m, metrics.family_delete, m.handle),
            Ready: self._on_ready,
            InitError: self._on_init_error,
            Finalized: self._on_finalized,
        }

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
        """Send `Init` and serve the stub's messages (blocking) until initialize has run."""
        launch = self.launch
        self.sock.settimeout(launch.settings.start_timeout_s or None)
        init = Init(str(launch.model_file), launch.args, launch.decoupled, launch.label, busy_poll.window_ns() // 1000)
        self.sock.sendall(pack(init))
        while not self._ready:
            try:
                message = self._receive_blocking()
            except TimeoutError:
                raise NaiadError.unavailable(
                    f"{launch.label}: the model did not finish initialize within {launch.settings.start_timeout_s:g} s"
                ) from None
            except MalformedMessage as exc:
                raise NaiadError.unavailable(f"{launch.label}: bad message from the model's process: {exc}") from None
            if message is None:
                code = self.process.wait()
                raise NaiadError.unavailable(
                    f"{launch.label}: the model's process ended during initialize ({describe_exit(code)})"
                )
            self._dispatch(message)
            if self._init_error is not None:
                log.error("%s: initialize failed:\n%s", launch.label, self._init_error.traceback)
                raise NaiadError.unavailable(f"{launch.label}: initialize failed: {self._init_error.message}")
        self.sock.settimeout(None)
        self.sock.setblocking(False)

    def _receive_blocking(self) -> StubMessage | None:
        header = self._read_exactly(FRAME_HEADER.size)
        if header is None:
            return None
        body = self._read_exactly(FRAME_HEADER.unpack(header)[0])
        return None if body is None else unpack(body)

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

    def send(self, message: StubMessage) -> None:
        """Send a message without tensors: on the loop once attached, else on the blocking
        socket of start-up and `finalize_blocking`."""
        if self.closed:
            return
        if self._transport is not None:
            self._transport.write(pack(message))
        else:
            self.sock.sendall(pack(message))

    def send_with(self, build: Callable[[RingWriter], StubMessage]) -> None:
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

    # -- what each message from the stub does --------------------------------------------

    def _dispatch(self, message: StubMessage) -> None:
        handler = self._handlers.get(type(message))
        if handler is None:
            raise MalformedMessage(
                f"the model's process sent {type(message).__name__}, a message only the server sends"
            )
        handler(message)

    def _on_result(self, message: Result) -> None:
        lent = self.lent_outputs.get(message.call_id)
        if message.responses is None:
            responses = None
        elif lent is None:
            responses = [self._decode_response(r) for r in message.responses]
        else:
            responses = [self._decode_response(r, lent.get(index, {})) for index, r in enumerate(message.responses)]
        self.from_stub.consumed(message.mark)
        future = self.calls.pop(message.call_id, None)
        if future is not None and not future.done():
            future.set_result((message, responses))

    def _on_respond(self, message: Respond) -> None:
        response = self._decode_response(message.response)
        self.from_stub.consumed(message.mark)
        self._respond(message.key, response, message.final)

    def _on_is_cancelled(self, message: IsCancelled) -> None:
        request = self.requests.get(message.key)
        self.send(Reply(message.qid, bool(request and request.cancelled)))

    def _on_bls(self, message: Bls) -> None:
        if self._transport is None:
            # Serving BLS needs the event loop, not attached yet (or no more).
            self.from_stub.consumed(message.mark)
            unavailable = ("UNAVAILABLE", f"BLS requests are not available during {self._phase()}")
            self.send(BlsResponse(message.qid, True, ResponseItem([], unavailable, {})))
            return
        inputs = [decode_array(self.from_stub, d) for d in message.inputs]
        self.from_stub.consumed(message.mark)
        call = BlsCall(
            message.model_name,
            message.model_version,
            inputs,
            message.output_names,
            message.request_id,
            message.correlation_id,
            message.flags,
            message.timeout,
            message.parameters,
        )
        self._serve_query(message.qid, self._serve_bls(message.qid, call, message.decoupled))

    def _on_bls_cancel(self, message: BlsCancel) -> None:
        cancelled = self._query_tasks.get(message.qid)
        if cancelled is not None:
            cancelled.cancel()

    def _on_model_control(self, message: ModelControl) -> None:
        if self._transport is None:
            # As BLS: serving it needs the event loop.
            self.send(Reply(message.qid, error=f"the model loading API is not available during {self._phase()}"))
            return
        self._serve_query(message.qid, self._serve_model_control(message))

    def _on_log(self, message: Log) -> None:
        log.log(_LOG_LEVELS.get(message.level, logging.INFO), "%s: %s", self.launch.label, message.message)

    def _answer(self, qid: int, call: Callable[..., object], *arguments: Any) -> None:
        """Run a metric query and reply with its value, or the reason it was refused."""
        try:
            value = call(*arguments)
        except NaiadError as exc:
            self.send(Reply(qid, error=exc.message))
            return
        self.send(Reply(qid, value))

    def _apply(self, message: StubMessage, call: Callable[..., object], *arguments: Any) -> None:
        """Run a metric change the model does not wait for; a refusal is only logged."""
        try:
            call(*arguments)
        except NaiadError as exc:
            log.warning("%s: custom metric %s failed: %s", self.launch.label, type(message).__name__, exc.message)

    def _on_ready(self, message: Ready) -> None:
        self._ready = True

    def _on_init_error(self, message: InitError) -> None:
        self._init_error = message

    def _on_finalized(self, message: Finalized) -> None:
        self._finalized_seen = True
        if self._finalized is not None:
            self._finalized.set()

    def _phase(self) -> str:
        return "finalize" if self._ready else "initialize"

    def _decode_response(
        self, item: ResponseItem | None, lent: dict[str, CudaPlacement] | None = None
    ) -> CoreResponse | None:
        if item is None:
            return None
        if lent is not None:
            outputs = [decode_array(self.from_stub, d) if d[3][0] != "w" else d for d in item.outputs]
            return _bind_written(outputs, item, lent, self.launch.label)
        return core_response_from_parts(
            [decode_array(self.from_stub, d) for d in item.outputs], item.error, item.parameters
        )

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
            # The model cancelled the stream (BlsCancel): leaving run_bls cancelled the call.
            self._send_bls_response(qid, cancelled_response())

    def _send_bls_response(self, qid: int, response: CoreResponse) -> bool:
        """Send one BLS response to the model; False once the process is gone."""
        if self.closed:
            return False
        final = response.final
        bare = final and not response.outputs and response.error is None and FINAL_MARKER in response.parameters
        try:
            self.send_with(lambda ring: BlsResponse(qid, final, None if bare else _core_response_item(ring, response)))
        except NaiadError:
            return False
        return True

    async def _serve_model_control(self, message: ModelControl) -> None:
        try:
            value = await manage_model(self.launch.server, message.action, message.arguments)
        except NaiadError as exc:
            self.send(Reply(message.qid, error=exc.message))
            return
        self.send(Reply(message.qid, value))

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
            self.send(Finalize())
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
            self.sock.sendall(pack(Finalize()))
            while not self._finalized_seen:
                message = self._receive_blocking()
                if message is None:
                    break
                self._dispatch(message)
        except (OSError, MalformedMessage):
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
                connection._dispatch(unpack(body))
        except Exception as exc:  # noqa: BLE001 - a garbled message: drop this process, keep serving
            label = connection.launch.label
            log.exception("%s: bad message from the model's process", label)
            connection.exit_reason = (
                f"{label}: the model's process sent a bad message ({exc}); it was stopped and is being restarted"
            )
            connection.kill()
            if connection._transport is not None:
                connection._transport.close()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._connection._lost()


def _bind_written(outputs: list[Any], item: ResponseItem, lent: dict[str, CudaPlacement], label: str) -> CoreResponse:
    """A response to a request that lent the stub outputs to write on a GPU: those it wrote
    (its ("w",) descriptors) become `written_on_device` tensors at the request's placements.
    One said to be written where nothing was lent is refused, never answered with zeros."""
    tensors = []
    for output in outputs:
        if len(output) == 3:
            name, datatype, array = output
            tensors.append(CoreTensor(name, datatype, array.shape, array))
            continue
        name, datatype, shape, _ = output
        placement = lent.get(name)
        if placement is None:
            error = NaiadError.internal(
                f"{label}: the model's process says it wrote output '{name}' on the GPU, where the request placed none"
            )
            return CoreResponse(error=error)
        tensors.append(CoreTensor.written_on_device(name, datatype, tuple(shape), placement))
    response = core_response_from_parts([], item.error, item.parameters)
    response.outputs = tensors
    return response


def _core_response_item(ring: RingWriter, response: CoreResponse) -> ResponseItem:
    """A BLS response, its outputs placed in `ring` (the stub's read_response reads it)."""
    return ResponseItem(
        [encode_array(ring, t.name, t.datatype, t.data) for t in response.outputs],
        None if response.error is None else (response.error.code.name, response.error.message),
        plain_parameters({k: v for k, v in response.parameters.items() if k != FINAL_MARKER}),
    )
