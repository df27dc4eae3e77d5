"""The default scheduler: each request goes to the next free instance, first come first
served, one request per execution."""

from __future__ import annotations

import asyncio

from ..errors import NaiadError
from ..inference import InferenceResponse
from .instance_runner import InstanceRunner
from .job import Job
from .scheduler import Scheduler

__all__ = ["DirectScheduler"]


class DirectScheduler(Scheduler):
    def __init__(self, runners: list[InstanceRunner]) -> None:
        self._runners = runners
        self._queue: asyncio.Queue[Job | None] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._accepting = False

    def enqueue(self, job: Job) -> None:
        if not self._accepting:
            job.finish(InferenceResponse(error=NaiadError.unavailable("model is not accepting requests")))
            return
        self._queue.put_nowait(job)

    async def start(self) -> None:
        self._accepting = True
        self._workers = [asyncio.create_task(self._work(r)) for r in self._runners]

    async def _work(self, runner: InstanceRunner) -> None:
        while True:
            job = await self._queue.get()
            if job is None:
                return
            if job.request.cancelled:
                job.finish(InferenceResponse(error=NaiadError.cancelled_request()))
                continue
            if runner.run_now([job]) is None:  # a short batch ran on the loop already
                await runner.run([job])
            # Not holding the finished request (and its tensors) while waiting for the next.
            job = None

    async def stop(self, timeout: float | None = None) -> None:
        self._accepting = False
        for _ in self._workers:
            self._queue.put_nowait(None)
        if self._workers:
            done, pending = await asyncio.wait(self._workers, timeout=timeout)
            for task in pending:
                task.cancel()
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if job is not None:
                job.finish(InferenceResponse(error=NaiadError.unavailable("model was unloaded")))
