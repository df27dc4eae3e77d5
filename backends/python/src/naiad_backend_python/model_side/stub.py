"""The model process: ``python -m naiad_backend_python.model_side.stub --socket-fd N ...``.

The server starts one per model instance. A reader thread takes control messages off the
socket, copies tensors out of the server's ring, answers pending BLS and cancellation
waits, and queues work for the main thread, whose event loop runs the model
(`initialize`, `execute`, `finalize`) through `ModelHost`. Responses and BLS requests go
back through `StubBridge`, with their tensors in this process's ring.

It exits when the server asks (finalize), or when its socket closes (the server went away).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import queue
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable

from .bridge import Bridge, set_default_bridge
from .model_host import ExecuteFailure, ModelHost, rescheduled, run_auto_complete
from .response_iterator import ResponseIterator
from ..ipc.shm_ring import RingReader, RingWriter
from .pb_utils import InferenceRequest, InferenceResponse, Logger, Tensor, TritonError, TritonModelException
from ..ipc.wire import FRAME_HEADER, decode_array, encode_array, pack_frame, plain_parameters, unpack_message

# How long a cancellation query waits for the server before assuming "not cancelled".
_QUERY_TIMEOUT_S = 30.0


class Channel:
    """The socket to the server plus the two rings, shared by every thread of the stub."""

    def __init__(self, sock: socket.socket, inbound: RingReader, outbound: RingWriter) -> None:
        self.sock = sock
        self.inbound = inbound
        self.outbound = outbound

    def send(self, message: dict[str, Any]) -> None:
        """Send a message without tensors (from any thread)."""
        with self.outbound.lock:
            self.sock.sendall(pack_frame(message))

    def send_with(self, build: Callable[[RingWriter], dict[str, Any]]) -> None:
        """Build a message that places tensors in the ring and send it, atomically."""
        with self.outbound.lock:
            message = build(self.outbound)
            message["mark"] = self.outbound.mark()
            self.sock.sendall(pack_frame(message))

    def receive(self) -> dict[str, Any] | None:
        header = _read_exactly(self.sock, FRAME_HEADER.size)
        if header is None:
            return None
        (length,) = FRAME_HEADER.unpack(header)
        body = _read_exactly(self.sock, length)
        if body is None:
            return None
        return unpack_message(body)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def encode_response(ring: RingWriter, response: InferenceResponse | None) -> dict[str, Any] | None:
    if response is None:
        return None
    error = response.error()
    return {
        "outputs": [encode_array(ring, t.name(), t.datatype(), t.as_numpy()) for t in response.output_tensors()],
        "error": None if error is None else (error.code_name(), error.message()),
        "parameters": plain_parameters(response.parameters_dict()),
    }


def decode_response(ring: RingReader, data: dict[str, Any] | None) -> InferenceResponse:
    if data is None:
        return InferenceResponse()
    error = data.get("error")
    outputs = [Tensor(name, array, datatype) for name, datatype, array in
               (decode_array(ring, d) for d in data.get("outputs", []))]
    return InferenceResponse(
        outputs,
        None if error is None else TritonError.from_code_name(error[0], error[1]),
        data.get("parameters") or {},
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
        """Called on the reader thread with a reply; tensors are already decoded."""
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
            sink({"final": True, "error": reason,
                  "response": InferenceResponse(error=TritonError(reason, TritonError.UNAVAILABLE))})

    # -- responses of received requests --------------------------------------------------

    def send_response(self, request: InferenceRequest, response: InferenceResponse | None, final: bool) -> None:
        self.channel.send_with(lambda ring: {
            "op": "respond", "key": request._key, "final": final, "response": encode_response(ring, response),
        })

    def is_cancelled(self, request: InferenceRequest) -> bool:
        replies: queue.Queue[dict[str, Any]] = queue.Queue()
        query = self._register(replies.put)
        self.channel.send({"op": "is_cancelled", "qid": query, "key": request._key})
        try:
            return bool(replies.get(timeout=_QUERY_TIMEOUT_S).get("value", False))
        except queue.Empty:
            return False

    # -- BLS -------------------------------------------------------------------------------

    def _start_bls(self, request: InferenceRequest, decoupled: bool, sink: Callable[[dict[str, Any]], None]) -> int:
        query = self._register(sink)
        self.channel.send_with(lambda ring: {
            "op": "bls", "qid": query, "decoupled": decoupled, "request": encode_bls_request(ring, request),
        })
        return query

    def bls(self, request: InferenceRequest) -> InferenceResponse:
        replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._start_bls(request, False, replies.put)
        return replies.get()["response"]

    def bls_stream(self, request: InferenceRequest) -> ResponseIterator:
        responses = ResponseIterator()
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
        return self.bls_stream(request)

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
        replies: queue.Queue[dict[str, Any]] = queue.Queue()
        message["qid"] = self._register(replies.put)
        self.channel.send(message)
        try:
            reply = replies.get(timeout=timeout)
        except queue.Empty:
            raise TritonModelException("the server did not answer") from None
        if reply.get("error"):
            raise TritonModelException(reply["error"])
        return reply

    def metric_family_new(self, handle: int, name: str, description: str, kind: str) -> None:
        self._ask({"op": "metric_family_new", "handle": handle, "name": name, "description": description,
                   "kind": kind})

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
    requests = []
    for data in message["requests"]:
        request = InferenceRequest(
            request_id=data["id"],
            correlation_id=data["correlation_id"],
            inputs=[Tensor(name, array, datatype) for name, datatype, array in data["inputs"]],
            requested_output_names=set(data["requested_output_names"]),
            model_name=data["model_name"],
            model_version=data["model_version"],
            flags=data["flags"],
            timeout=data["timeout"],
            parameters=data["parameters"],
        )
        request._bridge = bridge
        request._key = data["key"]
        requests.append(request)
    return requests


def _read_loop(channel: Channel, bridge: StubBridge, work: "asyncio.Queue[dict[str, Any] | None]",
               loop: asyncio.AbstractEventLoop) -> None:
    """The reader thread: decode every message, answer waiters, queue model work."""
    try:
        while True:
            message = channel.receive()
            if message is None:
                break
            op = message["op"]
            if op == "execute":
                for data in message["requests"]:
                    data["inputs"] = [decode_array(channel.inbound, d) for d in data["inputs"]]
                channel.inbound.consumed(message.get("mark"))
                loop.call_soon_threadsafe(work.put_nowait, message)
            elif op == "bls_response":
                message["response"] = decode_response(channel.inbound, message.get("response"))
                channel.inbound.consumed(message.get("mark"))
                bridge.resolve(message)
            elif op in ("cancelled", "metric_reply", "control_reply"):
                bridge.resolve(message)
            else:
                loop.call_soon_threadsafe(work.put_nowait, message)
    except (OSError, ValueError):
        pass
    # The server went away (after a finalize this process has already exited itself). Leave
    # now, even if model code is stuck in execute: nobody can use its answers any more.
    # (PR_SET_PDEATHSIG would not do: it fires when the *thread* that spawned us exits.)
    bridge.fail_all("the server closed the connection to the model process")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


async def _serve(channel: Channel, bridge: StubBridge, work: "asyncio.Queue[dict[str, Any] | None]") -> int:
    host: ModelHost | None = None
    while True:
        message = await work.get()
        if message is None:
            # Lost the server: leave without running finalize's user code.
            return 0
        op = message["op"]
        if op == "init":
            try:
                host = ModelHost(Path(message["model_file"]), message["args"], bridge, message["decoupled"],
                                 message["label"])
                await host.initialize()
            except BaseException as exc:  # noqa: BLE001 - reported to the server, then exit
                channel.send({"op": "init_error", "message": f"{type(exc).__name__}: {exc}",
                              "traceback": traceback.format_exc()})
                return 1
            channel.send({"op": "ready", "pid": os.getpid()})
        elif op == "execute":
            assert host is not None
            requests = _build_requests(message, bridge)
            try:
                responses = await host.execute(requests)
            except ExecuteFailure as failure:
                channel.send({"op": "result", "id": message["id"], "error": (failure.code_name, failure.text)})
                continue
            except BaseException as exc:  # noqa: BLE001 - e.g. SystemExit from model code
                channel.send({"op": "result", "id": message["id"],
                              "error": ("INTERNAL", f"{type(exc).__name__}: {exc}")})
                continue
            try:
                channel.send_with(lambda ring: {
                    "op": "result", "id": message["id"],
                    "responses": None if responses is None else [encode_response(ring, r) for r in responses],
                    "rescheduled": rescheduled(requests),
                })
            except Exception as exc:  # noqa: BLE001 - e.g. an output numpy cannot encode
                channel.send({"op": "result", "id": message["id"],
                              "error": ("INTERNAL", f"cannot send the responses: {type(exc).__name__}: {exc}")})
        elif op == "finalize":
            if host is not None:
                try:
                    await host.finalize()
                except Exception:  # noqa: BLE001
                    bridge.log(Logger.ERROR, "finalize failed:\n" + traceback.format_exc())
            channel.send({"op": "finalized"})
            return 0


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
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    bridge = StubBridge(channel, loop)
    set_default_bridge(bridge)
    work: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    reader = threading.Thread(target=_read_loop, args=(channel, bridge, work, loop), daemon=True,
                              name="naiad-stub-reader")
    reader.start()
    code = loop.run_until_complete(_serve(channel, bridge, work))
    sys.stdout.flush()
    sys.stderr.flush()
    # Model threads may still run; the server has what it needs, so leave now.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
