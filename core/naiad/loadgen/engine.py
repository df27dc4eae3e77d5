"""`LoadEngine`: keeps a load on the server: N lanes each sending its next request as soon
as the last is answered (concurrency), or requests sent on a fixed schedule from a pool of
lanes (request rate, perf_analyzer's constant distribution). Every answer lands in the
`WindowRecorder`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from .lane import Lane, RequestFailed
from .load_error import LoadError
from .request_source import RequestSource
from .window_recorder import WindowRecorder

__all__ = ["LoadEngine"]


class LoadEngine:
    def __init__(
        self,
        open_lane: Callable[[], Awaitable[Lane]],
        new_source: Callable[[], RequestSource],
        recorder: WindowRecorder,
    ) -> None:
        self._open_lane = open_lane
        self._new_source = new_source
        self._recorder = recorder
        self._running = False
        self._tasks: list[asyncio.Task[None]] = []
        self._lanes: list[Lane] = []

    async def start_concurrency(self, concurrency: int) -> None:
        self._running = True
        # All lanes connect before the first window, as perf_analyzer's contexts do.
        lanes = [await self._open_lane() for _ in range(concurrency)]
        self._lanes.extend(lanes)
        self._tasks = [asyncio.ensure_future(self._keep_sending(lane, self._new_source())) for lane in lanes]

    async def start_rate(self, request_rate: float) -> None:
        self._running = True
        first = await self._open_lane()
        self._lanes.append(first)
        self._tasks = [asyncio.ensure_future(self._schedule(request_rate, first))]

    def check(self) -> None:
        """Raise what stopped a sender (a server that went away: LoadError)."""
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def stop(self) -> None:
        self._running = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for lane in self._lanes:
            try:
                await lane.close()
            except Exception:  # noqa: BLE001 - closing what may already be gone
                pass
        self._lanes.clear()

    async def _keep_sending(self, lane: Lane, source: RequestSource) -> None:
        recorder = self._recorder
        clock = time.perf_counter_ns
        while self._running:
            request = source.next()
            start = clock()
            try:
                send_ns, recv_ns = await lane.infer(request)
            except RequestFailed as exc:
                recorder.failed(exc.message)
                continue
            recorder.succeeded(clock() - start, send_ns, recv_ns)

    async def _schedule(self, request_rate: float, first: Lane) -> None:
        """Send at `request_rate` requests/s; a request whose time came while the loop was
        busy goes at once, so the rate holds on average."""
        interval = 1.0 / request_rate
        idle: list[tuple[Lane, RequestSource]] = [(first, self._new_source())]
        pending: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        due = loop.time()
        try:
            while self._running:
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                due += interval
                if idle:
                    lane, source = idle.pop()
                else:
                    lane, source = await self._open_lane(), self._new_source()
                    self._lanes.append(lane)
                task = asyncio.ensure_future(self._send_one(lane, source, idle))
                pending.add(task)
                task.add_done_callback(pending.discard)
        finally:
            for task in pending:
                task.cancel()

    async def _send_one(self, lane: Lane, source: RequestSource, idle: list[tuple[Lane, RequestSource]]) -> None:
        start = time.perf_counter_ns()
        try:
            send_ns, recv_ns = await lane.infer(source.next())
        except RequestFailed as exc:
            self._recorder.failed(exc.message)
        except LoadError as exc:
            self._recorder.failed(str(exc))
            return
        else:
            self._recorder.succeeded(time.perf_counter_ns() - start, send_ns, recv_ns)
        idle.append((lane, source))
