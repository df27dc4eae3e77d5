"""`StubDispatcher`: serves the server's messages in the model's process, on its one thread.

One thread does the work, as Triton's stub does: the event loop wakes when the socket is
readable, the channel decodes each message (tensors come out of the server's ring) and
`dispatch` routes it by its class; `execute` runs right there, its responses going back
with their tensors in this process's ring. A request costs the stub one wake-up and no
hand-off between threads. `init` and `finalize` run as coroutines, and an `async def
execute` continues as a task, on the same loop.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from naiad_wire import busy_poll

from .device_memory import OpenRegions
from .model_host import ExecuteFailure, ModelHost, PendingExecute, rescheduled
from .pb_utils import InferenceRequest, InferenceResponse, Logger
from .stub_bridge import StubBridge
from .stub_channel import Channel, leave
from .stub_codec import (
    DecodedInputs,
    read_inputs,
    read_response,
    received_requests,
    response_item,
    write_placed_outputs,
)
from .stub_messages import (
    BlsResponse,
    Execute,
    Finalize,
    Finalized,
    ForgetRegions,
    Init,
    InitError,
    MalformedMessage,
    Ready,
    Reply,
    Result,
    StubMessage,
)

__all__ = ["StubDispatcher"]


class StubDispatcher:
    def __init__(self, channel: Channel, bridge: StubBridge, loop: asyncio.AbstractEventLoop) -> None:
        self.channel = channel
        self.bridge = bridge
        self.loop = loop
        self.host: ModelHost | None = None
        self.exit_code: asyncio.Future[int] = loop.create_future()
        self._thread = threading.get_ident()
        # Work read by the loop waits here until the loop has given back the read role (model
        # code must be free to read replies itself); work another thread read is posted.
        self._work: collections.deque[tuple[Callable[[Any], None], Any]] = collections.deque()
        self._in_read_ready = False
        self._said_written = False  # the log says once that outputs are written on the GPU
        self.regions = OpenRegions()  # the clients' CUDA regions requests named, kept open
        # When this process last sent a batch's answers, and whether the batch after the ones
        # before came within the busy-poll window of them: then the next is likely to as
        # well, and the process polls for it after its answers (`_answered`).
        self._answered_ns = 0
        self._batches_close = True
        # What each message the server sends does, on the thread that read it.
        self._handlers: dict[type, Callable[[Any], None]] = {
            Execute: self._read_execute,
            Reply: bridge.resolve_reply,
            BlsResponse: self._read_bls_response,
            ForgetRegions: lambda message: self._post(self._forget_regions, message),
            Init: lambda message: self._post(self._start_initialize, message),
            Finalize: lambda message: self._post(self._start_finalize, message),
        }
        channel.dispatch = self.dispatch

    def read_ready(self) -> None:
        self._in_read_ready = True
        try:
            self.channel.read_ready()
        except BaseException:  # noqa: BLE001 - a message this process cannot take
            self._broken()
        finally:
            self._in_read_ready = False
        self._run_work()

    def dispatch(self, message: StubMessage) -> None:
        """Route one message (called by whichever thread holds the read role)."""
        handler = self._handlers.get(type(message))
        if handler is None:
            raise MalformedMessage(f"the server sent {type(message).__name__}, a message only this process sends")
        handler(message)

    def _read_execute(self, message: Execute) -> None:
        if self._answered_ns:
            self._batches_close = time.monotonic_ns() - self._answered_ns <= busy_poll.window_ns()
        # The inputs leave the ring now, in the order the server placed them.
        self._post(self._execute, (message, read_inputs(self.channel.inbound, message)))

    def _read_bls_response(self, message: BlsResponse) -> None:
        inbound = self.channel.inbound
        response = read_response(inbound, message.response)
        inbound.consumed(message.mark)
        self.bridge.resolve_bls(message.qid, response, message.final)

    def _post(self, work: Callable[[Any], None], argument: Any) -> None:
        self._work.append((work, argument))
        if threading.get_ident() != self._thread:
            self.loop.call_soon_threadsafe(self._run_work)
        elif not self._in_read_ready:
            # Read by model code on this thread while it waits for a reply: run it afterwards.
            self.loop.call_soon(self._run_work)

    def _run_work(self) -> None:
        while self._work:
            work, argument = self._work.popleft()
            try:
                work(argument)
            except BaseException:  # noqa: BLE001 - model code's errors are answered inside the work
                self._broken()

    def _broken(self) -> None:
        """A fault of this process's own: a message it could not read, or an answer it could
        not send. The server would wait for ever for what this process owes it, so leave now:
        the server then fails those requests, saying the model's process exited, and starts a
        new one. (Left to the event loop, the exception would be logged and forgotten.)"""
        traceback.print_exc()
        leave(1)

    # -- the work ------------------------------------------------------------------------------

    def _start_initialize(self, message: Init) -> None:
        self.loop.create_task(self._initialize(message))

    def _start_finalize(self, message: Finalize) -> None:
        self.loop.create_task(self._finalize())

    async def _initialize(self, message: Init) -> None:
        busy_poll.configure(message.busy_poll_us)
        try:
            self.host = ModelHost(Path(message.model_file), message.args, self.bridge, message.decoupled, message.label)
            await self.host.initialize()
        except BaseException as exc:  # noqa: BLE001 - reported to the server, then exit
            self.channel.send(InitError(f"{type(exc).__name__}: {exc}", traceback.format_exc()))
            self._exit(1)
            return
        # What initialize built lives as long as the process: keep the cyclic collector off
        # it, so collections during serving walk only the young objects requests leave.
        gc.collect()
        gc.freeze()
        self.channel.send(Ready(os.getpid()))

    def _execute(self, work: tuple[Execute, DecodedInputs]) -> None:
        assert self.host is not None
        message, inputs = work
        try:
            requests = received_requests(self.bridge, message, inputs, self.regions)
            outcome = self.host.start_execute(requests)
        except BaseException as exc:  # noqa: BLE001 - ExecuteFailure, a region not opened, or e.g. SystemExit from model code
            self._send_failure(message.call_id, exc)
            return
        if isinstance(outcome, PendingExecute):
            self.loop.create_task(self._finish(message, requests, outcome))
        else:
            self._send_result(message, requests, outcome)

    async def _finish(self, message: Execute, requests: list[InferenceRequest], pending: PendingExecute) -> None:
        try:
            responses = await pending.finish()
        except BaseException as exc:  # noqa: BLE001
            self._send_failure(message.call_id, exc)
            return
        self._send_result(message, requests, responses)

    def _send_failure(self, call_id: int, exc: BaseException) -> None:
        if isinstance(exc, ExecuteFailure):
            error = (exc.code_name, exc.text)
        else:
            error = ("INTERNAL", f"{type(exc).__name__}: {exc}")
        self.channel.send(Result(call_id, error=error))

    def _send_result(
        self,
        message: Execute,
        requests: list[InferenceRequest],
        responses: list[InferenceResponse | None] | None,
    ) -> None:
        call_id = message.call_id
        try:
            written = None  # per response, the outputs written in the client's CUDA region
            if responses is not None and any(item.placed_outputs for item in message.requests):
                written = write_placed_outputs(message.requests, responses, self.regions)
                if not self._said_written and any(written):
                    self._said_written = True
                    self.bridge.log(
                        Logger.INFO,
                        "outputs placed in CUDA shared memory are written there by the model's process, device to device",
                    )

            def result(ring: Any) -> Result:
                if responses is None:
                    items = None
                elif written is None:
                    items = [response_item(ring, r) for r in responses]
                else:
                    items = [response_item(ring, r, w) for r, w in zip(responses, written)]
                return Result(call_id, items, rescheduled(requests))

            self.channel.send_with(result)
            self._answered()
        except Exception as exc:  # noqa: BLE001 - e.g. an output numpy cannot encode
            self.channel.send(
                Result(call_id, error=("INTERNAL", f"cannot send the responses: {type(exc).__name__}: {exc}"))
            )

    def _answered(self) -> None:
        """A batch's answers are sent. Waking this process costs the server tens of
        microseconds at the next batch (naiad_wire.busy_poll): when batches have been coming
        within the window of the answers before them, stay awake for the next one."""
        self._answered_ns = time.monotonic_ns()
        if self._batches_close:
            busy_poll.hold(self.loop)

    def _forget_regions(self, message: ForgetRegions) -> None:
        try:
            self.regions.forget(message.handles)
        except RuntimeError as exc:
            self.bridge.log(Logger.ERROR, f"closing a client's CUDA shared-memory region failed: {exc}")

    async def _finalize(self) -> None:
        if self.host is not None:
            try:
                await self.host.finalize()
            except Exception:  # noqa: BLE001
                self.bridge.log(Logger.ERROR, "finalize failed:\n" + traceback.format_exc())
        self.channel.send(Finalized())
        self._exit(0)

    def _exit(self, code: int) -> None:
        if not self.exit_code.done():
            self.exit_code.set_result(code)
