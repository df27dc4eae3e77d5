"""`StubBridge`: the model API's way to the server from the model's process (the `Bridge`
of process mode), as messages over the `Channel`.

A query (BLS, `is_cancelled`, model control, custom metrics) carries a number, `qid`; the
server's answer names it, and whichever thread reads the answer hands it to the query's
waiter here (`resolve_reply`, `resolve_bls`).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
from collections.abc import Callable
from typing import Any

from .bridge import Bridge
from .pb_utils import InferenceRequest, InferenceResponse, TritonModelException
from .response_iterator import ResponseIterator
from .stub_channel import Channel
from .stub_codec import bls_message, response_item
from .stub_messages import (
    BlsCancel,
    IsCancelled,
    Log,
    MetricFamilyDelete,
    MetricFamilyNew,
    MetricNew,
    MetricUpdate,
    MetricValue,
    ModelControl,
    Reply,
    Respond,
)

__all__ = ["StubBridge"]

# How long a cancellation query waits for the server before assuming "not cancelled".
_QUERY_TIMEOUT_S = 30.0

# Takes each response of a BLS call and whether it is the last.
_BlsSink = Callable[[InferenceResponse, bool], None]


class StubBridge(Bridge):
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self._query_ids = itertools.count(1)
        self._lock = threading.Lock()
        # qid -> what takes the answer (called on the thread that read it)
        self._queries: dict[int, Callable[[Reply], None]] = {}
        self._bls_calls: dict[int, _BlsSink] = {}
        # Handles of deleted metric families still to be reported to the server.
        self._doomed: collections.deque[int] = collections.deque()

    # -- answers, from the thread reading the socket ------------------------------------------

    def resolve_reply(self, reply: Reply) -> None:
        with self._lock:
            sink = self._queries.pop(reply.qid, None)
        if sink is not None:
            sink(reply)

    def resolve_bls(self, qid: int, response: InferenceResponse, final: bool) -> None:
        with self._lock:
            sink = self._bls_calls.pop(qid, None) if final else self._bls_calls.get(qid)
        if sink is not None:
            sink(response, final)

    def _new_query(self, sink: Callable[[Reply], None]) -> int:
        with self._lock:
            qid = next(self._query_ids)
            self._queries[qid] = sink
        return qid

    def _ask(self, build: Callable[[int], Any], timeout: float | None = _QUERY_TIMEOUT_S) -> Any:
        """Send the query `build(qid)` makes and block until its answer's value; raises with
        the server's reason when it refused."""
        self._send_doomed(blocking=True)
        replies: list[Reply] = []
        self.channel.send(build(self._new_query(replies.append)))
        if not self.channel.wait_until(lambda: bool(replies), timeout):
            raise TritonModelException("the server did not answer")
        reply = replies[0]
        if reply.error:
            raise TritonModelException(reply.error)
        return reply.value

    # -- responses of received requests --------------------------------------------------

    def send_response(self, request: InferenceRequest, response: InferenceResponse | None, final: bool) -> None:
        self.channel.send_with(lambda ring: Respond(request._key, final, response_item(ring, response)))

    def is_cancelled(self, request: InferenceRequest) -> bool:
        replies: list[Reply] = []
        self.channel.send(IsCancelled(self._new_query(replies.append), request._key))
        if not self.channel.wait_until(lambda: bool(replies), _QUERY_TIMEOUT_S):
            return False
        return bool(replies[0].value)

    # -- BLS -------------------------------------------------------------------------------

    def _start_bls(self, request: InferenceRequest, decoupled: bool, sink: _BlsSink) -> int:
        with self._lock:
            qid = next(self._query_ids)
            self._bls_calls[qid] = sink
        self.channel.send_with(lambda ring: bls_message(ring, qid, decoupled, request))
        return qid

    def bls(self, request: InferenceRequest) -> InferenceResponse:
        responses: list[InferenceResponse] = []
        self._start_bls(request, False, lambda response, final: responses.append(response))
        self.channel.wait_until(lambda: bool(responses))
        return responses[0]

    def bls_stream(self, request: InferenceRequest) -> ResponseIterator:
        responses = ResponseIterator(self.channel.wait_until)
        qid = self._start_bls(request, True, responses.put)
        responses.on_cancel = lambda: self.channel.send(BlsCancel(qid))
        return responses

    async def bls_async(self, request: InferenceRequest) -> InferenceResponse:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[InferenceResponse] = loop.create_future()

        def settle(response: InferenceResponse) -> None:
            if not future.done():
                future.set_result(response)

        def sink(response: InferenceResponse, final: bool) -> None:
            loop.call_soon_threadsafe(settle, response)

        self._start_bls(request, False, sink)
        return await future

    async def bls_stream_async(self, request: InferenceRequest) -> ResponseIterator:
        return await self.bls_stream(request).first_arrived()

    def manage_model(self, action: str, arguments: dict[str, Any]) -> Any:
        # No time limit: loading a model takes what it takes, and when the server goes away
        # this process leaves (Channel).
        return self._ask(lambda qid: ModelControl(qid, action, arguments), timeout=None)

    def log(self, level: int, message: str) -> None:
        # int(): messages carry plain values, not Logger.LogLevel members.
        self.channel.send(Log(int(level), message))

    # -- custom metrics: creation and value() wait for the server; updates do not ------------

    def metric_family_new(self, handle: int, name: str, description: str, kind: str) -> None:
        self._ask(lambda qid: MetricFamilyNew(qid, handle, name, description, kind))

    def metric_family_delete(self, handle: int) -> None:
        # Called from MetricFamily.__del__, which garbage collection may run at any allocation,
        # even on a thread that holds the channel's lock right now: never block here. What
        # cannot be sent at once goes with the next metric call.
        self._doomed.append(handle)
        self._send_doomed(blocking=False)

    def _send_doomed(self, blocking: bool) -> None:
        while self._doomed:
            try:
                handle = self._doomed.popleft()
            except IndexError:  # another thread took the last one
                return
            if blocking:
                self.channel.send(MetricFamilyDelete(handle))
            elif not self.channel.try_send(MetricFamilyDelete(handle)):
                self._doomed.appendleft(handle)
                return

    def metric_new(self, handle: int, family: int, labels: dict[str, str], buckets: list[float] | None) -> None:
        self._ask(lambda qid: MetricNew(qid, handle, family, labels, buckets))

    def metric_update(self, handle: int, operation: str, value: float) -> None:
        # One socket, written under one lock: the server applies updates in the order sent.
        self._send_doomed(blocking=True)
        self.channel.send(MetricUpdate(handle, operation, value))

    def metric_value(self, handle: int) -> float:
        return float(self._ask(lambda qid: MetricValue(qid, handle)))
