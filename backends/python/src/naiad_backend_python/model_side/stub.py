"""The model process: ``python -m naiad_backend_python.model_side.stub --socket-fd N ...``.

The server starts one per model instance: forked from the stub template (stub_template.py),
which calls `main` with the same arguments, or spawned with this command line. One thread does the work, as Triton's stub does:
its event loop wakes when the socket is readable, decodes the message (tensors come out of
the server's ring), and runs the model's `execute` right there; the responses go back
through `StubBridge` with their tensors in this process's ring. A request costs the stub one
wake-up and no hand-off between threads. `async def` models run on the same loop.

Model code may block waiting for the server (a BLS call, `is_cancelled`, a custom metric,
model control), on this thread or on a thread of its own. Whoever waits reads the socket
itself while nobody else does (`Channel.wait_until`), so a reply is never stuck behind a
busy thread; replies and work read by another thread reach their owner through it.

It exits when the server asks (finalize), or when its socket closes (the server went away);
a watchdog thread sees the close even while model code is stuck in `execute`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import itertools
import json
import os
import select
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from naiad_wire.interprocess.messages import (
    FrameReader,
    decode_array,
    encode_array,
    pack_frame,
    pack_placing,
    plain_parameters,
    unpack_message,
)
from naiad_wire.interprocess.shm_ring import RingReader, RingWriter

from .bridge import Bridge, set_default_bridge
from .model_host import ExecuteFailure, ModelHost, PendingExecute, rescheduled, run_auto_complete
from .pb_utils import InferenceRequest, InferenceResponse, Logger, Tensor, TritonError, TritonModelException
from .response_iterator import ResponseIterator

# How long a cancellation query waits for the server before assuming "not cancelled".
_QUERY_TIMEOUT_S = 30.0
_READ_BYTES = 1 << 16


class Channel:
    """The socket to the server plus the two rings, shared by every thread of the stub.

    Reading has one holder at a time: the event loop when the socket becomes readable, or a
    thread waiting for a reply (`wait_until`). The holder decodes every message it reads and
    hands it to `dispatch`; giving the role back wakes the other waiters to look again."""

    def __init__(self, sock: socket.socket, inbound: RingReader, outbound: RingWriter) -> None:
        self.sock = sock
        self.inbound = inbound
        self.outbound = outbound
        self.dispatch: Callable[[dict[str, Any]], None] = lambda message: None
        self._frames = FrameReader()
        self._turn = threading.Condition(threading.Lock())
        self._reading = False
        self._waiting = 0  # threads waiting on _turn: giving the role back wakes them
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    def send(self, message: dict[str, Any]) -> None:
        """Send a message without tensors (from any thread)."""
        with self.outbound.lock:
            self.sock.sendall(pack_frame(message))

    def send_with(self, build: Callable[[RingWriter], dict[str, Any]]) -> None:
        """Build a message that places tensors in the ring and send it, atomically."""
        with self.outbound.lock:
            self.sock.sendall(pack_placing(build, self.outbound))

    def read_ready(self) -> None:
        """The loop's reader callback: take what the socket holds. When a waiting thread is
        reading right now, wait for it to finish its read (it is taking the very bytes that
        woke the loop); returning at once would have the loop spin on a readable socket."""
        with self._turn:
            while self._reading:
                self._wait_turn(None)
            self._reading = True
        try:
            self._read(wait_s=0.0)
        finally:
            self._give_back()

    def wait_until(self, done: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until `done()`, reading the socket whenever nobody else does. False when
        `timeout` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._turn:
                while True:
                    if done():
                        return True
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    if not self._reading:
                        self._reading = True
                        break
                    self._wait_turn(remaining)
            try:
                if not done():
                    self._read(wait_s=remaining)
            finally:
                self._give_back()

    def _wait_turn(self, timeout: float | None) -> None:
        """Wait for the read role to be given back; call holding `_turn`."""
        self._waiting += 1
        try:
            self._turn.wait(timeout)
        finally:
            self._waiting -= 1

    def _give_back(self) -> None:
        with self._turn:
            self._reading = False
            if self._waiting:  # the common case, the loop reading alone, notifies nobody
                self._turn.notify_all()

    def _read(self, wait_s: float | None) -> None:
        if wait_s != 0.0 and not self._poll.poll(None if wait_s is None else max(1, int(wait_s * 1000))):
            return
        try:
            data = self.sock.recv(_READ_BYTES, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            _server_gone()
        for body in self._frames.feed(data):
            self.dispatch(unpack_message(body))


def _server_gone() -> None:
    """The server went away (after a finalize this process has already exited itself). Leave
    now, even if model code is stuck in execute: nobody can use its answers any more.
    (PR_SET_PDEATHSIG would not do: it fires when the *thread* that spawned us exits.)"""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _watch_for_hang_up(sock: socket.socket) -> None:
    """A daemon thread: wakes only when the server closes the socket, so the process goes
    even while its one thread is stuck in model code."""
    watcher = select.poll()
    watcher.register(sock.fileno(), select.POLLRDHUP)
    while True:
        for _, events in watcher.poll():
            if events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                _server_gone()


def encode_response(ring: RingWriter, response: InferenceResponse | None) -> tuple[Any, ...] | None:
    """A response as ``(outputs, error, parameters)``: a tuple pickles and reads faster than a dict."""
    if response is None:
        return None
    error = response._error
    return (
        [encode_array(ring, t._name, t._datatype, t._array) for t in response._outputs],
        None if error is None else (error.code_name(), error.message()),
        plain_parameters(response._parameters),
    )


def decode_response(ring: RingReader, data: tuple[Any, ...] | None) -> InferenceResponse:
    if data is None:
        return InferenceResponse()
    outputs, error, parameters = data
    return InferenceResponse(
        [Tensor._trusted(name, array, datatype) for name, datatype, array in (decode_array(ring, d) for d in outputs)],
        None if error is None else TritonError.from_code_name(error[0], error[1]),
        parameters or {},
    )


def encode_bls_request(ring: RingWriter, request: InferenceRequest) -> dict[str, Any]:
    return {
        "model_name": request.model_name(),
        "model_version": request.model_version(),
        "request_id": request.request_id(),
        "correlation_id": request.correlation_id(),
        "flags": request.flags(),
        "timeout": request.timeout(),
        "parameters": plain_parameters(request.parameters_dict()),
        "requested_output_names": list(request.requested_output_names()),
        "inputs": [encode_array(ring, t.name(), t.datatype(), t.as_numpy()) for t in request.inputs()],
    }


class StubBridge(Bridge):
    """The model-side API's way to the server, over the channel."""

    def __init__(self, channel: Channel, loop: asyncio.AbstractEventLoop) -> None:
        self.channel = channel
        self.loop = loop
        self._query_ids = itertools.count(1)
        # query id -> callable taking each reply message (called on the reader thread).
        self.waiters: dict[int, Callable[[dict[str, Any]], None]] = {}
        self._lock = threading.Lock()
        # Handles of deleted metric families still to be reported to the server.
        self._doomed: collections.deque[int] = collections.deque()

    def _register(self, sink: Callable[[dict[str, Any]], None]) -> int:
        with self._lock:
            query = next(self._query_ids)
            self.waiters[query] = sink
        return query

    def resolve(self, message: dict[str, Any]) -> None:
        """Called by the thread reading the socket with a reply; tensors are already decoded."""
        with self._lock:
            sink = self.waiters.get(message["qid"])
            if sink is not None and message.get("final", True):
                del self.waiters[message["qid"]]
        if sink is not None:
            sink(message)

    def fail_all(self, reason: str) -> None:
        with self._lock:
            sinks = list(self.waiters.values())
            self.waiters.clear()
        for sink in sinks:
            sink(
                {
                    "final": True,
                    "error": reason,
                    "response": InferenceResponse(error=TritonError(reason, TritonError.UNAVAILABLE)),
                }
            )

    # -- responses of received requests --------------------------------------------------

    def send_response(self, request: InferenceRequest, response: InferenceResponse | None, final: bool) -> None:
        self.channel.send_with(
            lambda ring: {
                "op": "respond",
                "key": request._key,
                "final": final,
                "response": encode_response(ring, response),
            }
        )

    def is_cancelled(self, request: InferenceRequest) -> bool:
        replies: list[dict[str, Any]] = []
        query = self._register(replies.append)
        self.channel.send({"op": "is_cancelled", "qid": query, "key": request._key})
        if not self.channel.wait_until(lambda: bool(replies), _QUERY_TIMEOUT_S):
            return False
        return bool(replies[0].get("value", False))

    # -- BLS -------------------------------------------------------------------------------

    def _start_bls(self, request: InferenceRequest, decoupled: bool, sink: Callable[[dict[str, Any]], None]) -> int:
        query = self._register(sink)
        self.channel.send_with(
            lambda ring: {
                "op": "bls",
                "qid": query,
                "decoupled": decoupled,
                "request": encode_bls_request(ring, request),
            }
        )
        return query

    def bls(self, request: InferenceRequest) -> InferenceResponse:
        replies: list[dict[str, Any]] = []
        self._start_bls(request, False, replies.append)
        self.channel.wait_until(lambda: bool(replies))
        return replies[0]["response"]

    def bls_stream(self, request: InferenceRequest) -> ResponseIterator:
        responses = ResponseIterator(self.channel.wait_until)
        query = self._start_bls(request, True, lambda reply: responses.put(reply["response"], reply.get("final", True)))
        responses.on_cancel = lambda: self.channel.send({"op": "bls_cancel", "qid": query})
        return responses

    async def bls_async(self, request: InferenceRequest) -> InferenceResponse:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()

        def sink(reply: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(lambda: future.done() or future.set_result(reply))

        self._start_bls(request, False, sink)
        return (await future)["response"]

    async def bls_stream_async(self, request: InferenceRequest) -> ResponseIterator:
        return await self.bls_stream(request).first_arrived()

    def manage_model(self, action: str, arguments: dict[str, Any]) -> Any:
        # No time limit: loading a model takes what it takes, and a lost server answers every
        # waiter (fail_all).
        return self._ask({"op": "model_control", "action": action, "arguments": arguments}, timeout=None)["value"]

    def log(self, level: int, message: str) -> None:
        # int(): the control channel carries plain values, not Logger.LogLevel members.
        self.channel.send({"op": "log", "level": int(level), "message": message})

    # -- custom metrics: creation and value() wait for the server; updates do not ------------

    def _ask(self, message: dict[str, Any], timeout: float | None = _QUERY_TIMEOUT_S) -> dict[str, Any]:
        self._send_doomed(blocking=True)
        replies: list[dict[str, Any]] = []
        message["qid"] = self._register(replies.append)
        self.channel.send(message)
        if not self.channel.wait_until(lambda: bool(replies), timeout):
            raise TritonModelException("the server did not answer")
        reply = replies[0]
        if reply.get("error"):
            raise TritonModelException(reply["error"])
        return reply

    def metric_family_new(self, handle: int, name: str, description: str, kind: str) -> None:
        self._ask({"op": "metric_family_new", "handle": handle, "name": name, "description": description, "kind": kind})

    def metric_family_delete(self, handle: int) -> None:
        # Called from MetricFamily.__del__, which garbage collection may run at any allocation,
        # even on a thread that holds the channel's lock right now: never block here. What
        # cannot be sent at once goes with the next metric call.
        self._doomed.append(handle)
        self._send_doomed(blocking=False)

    def _send_doomed(self, blocking: bool) -> None:
        if not self._doomed:
            return
        lock = self.channel.outbound.lock
        if not lock.acquire(blocking=blocking):
            return
        try:
            while self._doomed:
                handle = self._doomed.popleft()
                self.channel.sock.sendall(pack_frame({"op": "metric_family_delete", "handle": handle}))
        finally:
            lock.release()

    def metric_new(self, handle: int, family: int, labels: dict[str, str], buckets: list[float] | None) -> None:
        self._ask({"op": "metric_new", "handle": handle, "family": family, "labels": labels, "buckets": buckets})

    def metric_update(self, handle: int, operation: str, value: float) -> None:
        # One socket, written under one lock: the server applies updates in the order sent.
        self._send_doomed(blocking=True)
        self.channel.send({"op": "metric_update", "handle": handle, "operation": operation, "value": value})

    def metric_value(self, handle: int) -> float:
        return float(self._ask({"op": "metric_value", "handle": handle})["value"])


def _build_requests(message: dict[str, Any], bridge: StubBridge) -> list[InferenceRequest]:
    """The model's requests of an execute message, whose inputs `dispatch` has decoded."""
    model_name, model_version = message["model"]
    return [
        InferenceRequest._received(
            bridge,
            key,
            request_id,
            correlation_id,
            [Tensor._trusted(name, array, datatype) for name, datatype, array in inputs],
            set(output_names),
            model_name,
            model_version,
            flags,
            timeout,
            parameters,
        )
        for (key, request_id, correlation_id, flags, timeout, parameters, output_names, _), inputs in zip(
            message["requests"], message["inputs"]
        )
    ]


class ModelProcess:
    """Serves the server's messages on this process's one thread: `init` and `finalize` as
    coroutines, `execute` straight from the read callback (an `async def execute` continues
    as a task on the same loop)."""

    def __init__(self, channel: Channel, bridge: StubBridge, loop: asyncio.AbstractEventLoop) -> None:
        self.channel = channel
        self.bridge = bridge
        self.loop = loop
        self.host: ModelHost | None = None
        self.exit_code: asyncio.Future[int] = loop.create_future()
        self._thread = threading.get_ident()
        # Work read by the loop waits here until the loop has given back the read role (model
        # code must be free to read replies itself); work another thread read is posted.
        self._work: collections.deque[dict[str, Any]] = collections.deque()
        self._in_read_ready = False
        channel.dispatch = self.dispatch

    def read_ready(self) -> None:
        self._in_read_ready = True
        try:
            self.channel.read_ready()
        finally:
            self._in_read_ready = False
        self._run_work()

    def dispatch(self, message: dict[str, Any]) -> None:
        """Route one message (called by whichever thread holds the read role)."""
        op = message["op"]
        channel = self.channel
        if op == "execute":
            inbound = channel.inbound
            # A request travels as (key, id, correlation id, flags, timeout, parameters,
            # requested output names, inputs); see ProcessInstance.execute.
            message["inputs"] = [[decode_array(inbound, d) for d in request[7]] for request in message["requests"]]
            inbound.consumed(message.get("mark"))
        elif op == "bls_response":
            message["response"] = decode_response(channel.inbound, message.get("response"))
            channel.inbound.consumed(message.get("mark"))
            self.bridge.resolve(message)
            return
        elif op in ("cancelled", "metric_reply", "control_reply"):
            self.bridge.resolve(message)
            return
        self._work.append(message)
        if threading.get_ident() != self._thread:
            self.loop.call_soon_threadsafe(self._run_work)
        elif not self._in_read_ready:
            # Read by model code on this thread while it waits for a reply: run it afterwards.
            self.loop.call_soon(self._run_work)

    def _run_work(self) -> None:
        while self._work:
            message = self._work.popleft()
            op = message["op"]
            if op == "execute":
                self._execute(message)
            elif op == "init":
                self.loop.create_task(self._initialize(message))
            elif op == "finalize":
                self.loop.create_task(self._finalize())

    async def _initialize(self, message: dict[str, Any]) -> None:
        try:
            self.host = ModelHost(
                Path(message["model_file"]), message["args"], self.bridge, message["decoupled"], message["label"]
            )
            await self.host.initialize()
        except BaseException as exc:  # noqa: BLE001 - reported to the server, then exit
            self.channel.send(
                {"op": "init_error", "message": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            )
            self._exit(1)
            return
        # What initialize built lives as long as the process: keep the cyclic collector off
        # it, so collections during serving walk only the young objects requests leave.
        gc.collect()
        gc.freeze()
        self.channel.send({"op": "ready", "pid": os.getpid()})

    def _execute(self, message: dict[str, Any]) -> None:
        assert self.host is not None
        requests = _build_requests(message, self.bridge)
        try:
            outcome = self.host.start_execute(requests)
        except BaseException as exc:  # noqa: BLE001 - ExecuteFailure, or e.g. SystemExit from model code
            self._send_failure(message, exc)
            return
        if isinstance(outcome, PendingExecute):
            self.loop.create_task(self._finish(message, requests, outcome))
        else:
            self._send_result(message, requests, outcome)

    async def _finish(self, message: dict[str, Any], requests: list[InferenceRequest], pending: PendingExecute) -> None:
        try:
            responses = await pending.finish()
        except BaseException as exc:  # noqa: BLE001
            self._send_failure(message, exc)
            return
        self._send_result(message, requests, responses)

    def _send_failure(self, message: dict[str, Any], exc: BaseException) -> None:
        if isinstance(exc, ExecuteFailure):
            error = (exc.code_name, exc.text)
        else:
            error = ("INTERNAL", f"{type(exc).__name__}: {exc}")
        self.channel.send({"op": "result", "id": message["id"], "error": error})

    def _send_result(
        self,
        message: dict[str, Any],
        requests: list[InferenceRequest],
        responses: list[InferenceResponse | None] | None,
    ) -> None:
        try:
            self.channel.send_with(
                lambda ring: {
                    "op": "result",
                    "id": message["id"],
                    "responses": None if responses is None else [encode_response(ring, r) for r in responses],
                    "rescheduled": rescheduled(requests),
                }
            )
        except Exception as exc:  # noqa: BLE001 - e.g. an output numpy cannot encode
            self.channel.send(
                {
                    "op": "result",
                    "id": message["id"],
                    "error": ("INTERNAL", f"cannot send the responses: {type(exc).__name__}: {exc}"),
                }
            )

    async def _finalize(self) -> None:
        if self.host is not None:
            try:
                await self.host.finalize()
            except Exception:  # noqa: BLE001
                self.bridge.log(Logger.ERROR, "finalize failed:\n" + traceback.format_exc())
        self.channel.send({"op": "finalized"})
        self._exit(0)

    def _exit(self, code: int) -> None:
        if not self.exit_code.done():
            self.exit_code.set_result(code)


def _auto_complete_main(model_file: str) -> int:
    """``--auto-complete FILE``: read a config JSON on stdin, write the completed one."""
    config = json.load(sys.stdin)
    try:
        result = run_auto_complete(Path(model_file), config, in_server=False)
    except Exception as exc:  # noqa: BLE001
        json.dump({"error": f"{type(exc).__name__}: {exc}"}, sys.stdout)
        return 0
    json.dump({"config": result}, sys.stdout)
    return 0


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where the model's interpreter has it (the server's always does): each
    execute costs the stub one wake-up of its loop, which uvloop turns several microseconds
    faster than asyncio's own. An EXECUTION_ENV_PATH environment without it gets asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="naiad_backend_python.model_side.stub")
    parser.add_argument("--socket-fd", type=int)
    parser.add_argument("--inbound-fd", type=int)
    parser.add_argument("--outbound-fd", type=int)
    parser.add_argument("--auto-complete", metavar="MODEL_FILE")
    args = parser.parse_args(argv)
    # Model code sees the command line Triton's stub leaves it (its embedded interpreter
    # has no arguments), so argparse and unittest.main() in a model parse nothing of ours.
    sys.argv = [""]
    if args.auto_complete:
        return _auto_complete_main(args.auto_complete)
    sock = socket.socket(fileno=args.socket_fd)
    channel = Channel(sock, RingReader(args.inbound_fd), RingWriter(args.outbound_fd))
    loop = _new_event_loop()
    asyncio.set_event_loop(loop)
    bridge = StubBridge(channel, loop)
    set_default_bridge(bridge)
    process = ModelProcess(channel, bridge, loop)
    threading.Thread(target=_watch_for_hang_up, args=(sock,), daemon=True, name="naiad-stub-watchdog").start()
    loop.add_reader(sock.fileno(), process.read_ready)
    code = loop.run_until_complete(process.exit_code)
    sys.stdout.flush()
    sys.stderr.flush()
    # Model threads may still run; the server has what it needs, so leave now.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
