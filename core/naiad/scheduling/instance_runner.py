"""Runs batches of jobs on one model instance and routes the responses back.

Owns the instance's execution thread (for a synchronous `execute`; short batches of a
backend that allows it run on the event loop instead, see `inline_execution`), the ABI
checks on what `execute` returns, decoupled response senders, the execution statistics,
and the instance's place in the rate limiter (its resources are held for each execution).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

from naiad_wire import busy_poll

from ..backend.abi import ModelInstance
from ..backend.batching import take_phase_times
from ..errors import NaiadError
from ..inference import InferenceRequest, InferenceResponse
from ..observability.statistics import ModelStatistics
from .inline_execution import InlineExecution
from .instance_thread import InstanceThread
from .job import Job
from .rate_limiter import InstanceGate

__all__ = ["InstanceRunner"]

log = logging.getLogger("naiad.scheduling")

# Triton's words (clients match on them) for a reschedule a model's scheduler cannot do.
_NOT_RESCHEDULABLE = (
    "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not configured "
    "to handle such a flag."
)


class InstanceRunner:
    """One instance, executed one batch at a time (the scheduler guarantees that)."""

    def __init__(
        self,
        instance: ModelInstance,
        statistics: ModelStatistics,
        model_name: str,
        version: str,
        decoupled: bool,
        gate: InstanceGate | None = None,
        in_flight: Callable[[], int] | None = None,
    ) -> None:
        self.instance = instance
        self.gate = gate
        self.statistics = statistics
        self.model_name = model_name
        self.version = version
        self.decoupled = decoupled
        # (mypyc compiles this module; it prefixes attribute names with "_" in C, so neither
        # may be named `_thread` or `_inline`, which become C keywords.)
        # None for a coroutine `execute`, which runs on the loop.
        self._executor: InstanceThread | None = None
        # Set when short batches may run on the loop (a synchronous execute that may run on any thread).
        self._inline_rule: InlineExecution | None = None
        # The requests the server has in flight (None: unknown), for InlineExecution's `alone`.
        self._in_flight = in_flight
        # How long an awaited execution usually takes (a moving average, ns): whether the
        # loop polls for its result (busy_poll).
        self._typical_ns = 0
        # The loop it runs batches on, looked up at its first (asyncio.get_running_loop asks
        # the kernel for the process id on CPython 3.11: a system call each time).
        self._loop: asyncio.AbstractEventLoop | None = None
        if not inspect.iscoroutinefunction(instance.execute):
            self._executor = InstanceThread(f"naiad-{instance.context.name}")
            if instance.runs_on_any_thread:
                self._inline_rule = InlineExecution()

    @property
    def name(self) -> str:
        return self.instance.context.name

    async def run(
        self, jobs: list[Job], reschedulable: bool = False, on_free: Callable[[], None] | None = None
    ) -> list[Job]:
        """Execute `jobs` as one batch; every job gets its final response (an error one
        if anything goes wrong), so no caller waits forever. The exception: jobs whose
        model asked to run them again (`request.reschedule`) are returned, unfinished, to a
        scheduler that can queue them again (`reschedulable`); elsewhere they fail.

        `on_free` is called once the instance may take the next batch. For an instance
        thread that is before the responses are handed to their requests: the task of a
        batch a scheduler starts there runs ahead of the connections' tasks that write the
        answers, and the thread (and its GPU) works while they do. For a coroutine `execute`
        (a model's process) it is after them: a process given its next batch first competed
        with the loop and the clients for the CPUs (add_sub over gRPC at 64 connections, on
        two CPUs shared with the client: 10-15% fewer requests/s)."""
        if self.gate is None:
            return await self._run(jobs, reschedulable, on_free)
        # Waiting for the rate limiter counts as queue time, as in Triton.
        await self.gate.acquire()
        try:
            return await self._run(jobs, reschedulable, on_free)
        finally:
            self.gate.release()

    def run_now(self, jobs: list[Job], reschedulable: bool = False) -> list[Job] | None:
        """`run`, done before returning, when the batch may run on the loop at once: the
        instance allows it, the batch is short (`inline_execution`) and no rate limiter
        gates the instance. Otherwise None, and nothing was touched: the caller `run`s
        the batch. Saves a scheduler the task it would start for `run`."""
        if self._inline_rule is None or self.gate is not None:
            return None
        elements = _element_count(jobs)
        if not self._inline_rule.choose(elements, self._alone(jobs)):
            return None
        return self._run_inline(jobs, elements, reschedulable)

    def _alone(self, jobs: list[Job]) -> bool:
        """Whether these jobs are every request the server has in flight."""
        return self._in_flight is not None and self._in_flight() == len(jobs)

    async def _run(self, jobs: list[Job], reschedulable: bool, on_free: Callable[[], None] | None) -> list[Job]:
        if self._inline_rule is not None:
            elements = _element_count(jobs)
            if self._inline_rule.choose(elements, self._alone(jobs)):
                outcome = self._run_inline(jobs, elements, reschedulable)
                self._freed(on_free)
                return outcome
        start, counts = self._begin(jobs)
        requests = [job.request for job in jobs]
        # A batch awaited on the loop (a coroutine `execute`, such as a model process's) that
        # usually ends within the busy-poll window: the loop stays awake for its result and,
        # after its answers go out, for the clients' next requests. Not for an instance
        # thread's batch: a polling loop would contend with it for the GIL.
        window = busy_poll.window_ns()
        short = window != 0 and self._executor is None and self._typical_ns <= window
        if short:
            busy_poll.hold(self._running_loop())
        failure: Exception | None = None
        result: Any = None
        phases = (0, 0)
        try:
            if self._executor is None:
                result = await self.instance.execute(requests)  # type: ignore[misc]
            elif self._inline_rule is None:
                result, phases = await self._executor.run_on(self._running_loop(), self._execute_timed, requests)
            else:
                result, phases = await self._executor.run_on(
                    self._running_loop(), self._execute_measured, requests, elements
                )
        except Exception as exc:  # noqa: BLE001 - a backend failure fails its batch, not the server
            failure = exc
        finally:
            # Awaited executions only: one that runs on the loop needs no wake-up.
            self._typical_ns = (7 * self._typical_ns + time.monotonic_ns() - start) // 8
        if short and failure is None:
            busy_poll.hold(self._running_loop())
        threaded = self._executor is not None  # free before the answers (see `run`)
        if threaded:
            self._freed(on_free)
        if failure is None:
            again = self._finish(jobs, start, counts, result, phases, reschedulable)
        else:
            again = self._failed(jobs, start, counts, failure)
        if not threaded:
            self._freed(on_free)
        return again

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _freed(self, on_free: Callable[[], None] | None) -> None:
        """Tell the scheduler the instance is free; whatever it does then, this batch's
        answers still go out."""
        if on_free is None:
            return
        try:
            on_free()
        except Exception:  # noqa: BLE001 - a scheduler's failure must not cost these requests their answers
            log.exception("model '%s' instance %s: starting the next batch failed", self.model_name, self.name)

    def _run_inline(self, jobs: list[Job], elements: int, reschedulable: bool) -> list[Job]:
        start, counts = self._begin(jobs)
        try:
            result, phases = self._execute_measured([job.request for job in jobs], elements)
        except Exception as exc:  # noqa: BLE001 - a backend failure fails its batch, not the server
            return self._failed(jobs, start, counts, exc)
        return self._finish(jobs, start, counts, result, phases, reschedulable)

    def _begin(self, jobs: list[Job]) -> tuple[int, tuple[int, int]]:
        """The execution starts: its start time, and (inferences, requests) it counts."""
        statistics = self.statistics
        start = time.monotonic_ns()
        # Padding jobs (batch_size 0, a sequence batcher's empty slots) are not requests:
        # they count in no statistic.
        inferences = counted = 0
        for job in jobs:
            if job.batch_size:
                statistics.queue.add(start - job.enqueued_ns)
                # nv_inference_pending_request_count counts requests awaiting execution.
                job.executed = True
                statistics.pending -= 1
                inferences += job.batch_size
                counted += 1
        if self.decoupled:
            loop = self._running_loop()
            for job in jobs:
                job.request.response_sender = self._sender(loop, job)
        return start, (inferences, counted)

    def _failed(self, jobs: list[Job], start: int, counts: tuple[int, int], exc: Exception) -> list[Job]:
        log.warning("model '%s' instance %s failed a batch: %s", self.model_name, self.name, exc)
        error = (
            exc
            if isinstance(exc, NaiadError)
            else NaiadError.internal(f"model '{self.model_name}' failed to execute: {type(exc).__name__}: {exc}")
        )
        failed_ns = time.monotonic_ns() - start
        self.statistics.record_failed_execution(counts[0], failed_ns)
        _trace_compute(jobs, start, failed_ns)
        for job in jobs:
            job.finish(self._stamp(InferenceResponse(error=error), job))
        return []

    def _finish(
        self,
        jobs: list[Job],
        start: int,
        counts: tuple[int, int],
        result: Any,
        phases: tuple[int, int],
        reschedulable: bool,
    ) -> list[Job]:
        elapsed = time.monotonic_ns() - start
        _trace_compute(jobs, start, elapsed)
        input_ns, output_ns = phases
        self.statistics.record_execution(
            counts[0], counts[1], input_ns, max(elapsed - input_ns - output_ns, 0), output_ns
        )
        if self.decoupled:
            self._check_decoupled(result, jobs)
        else:
            self._deliver(result, jobs)
        return self._take_rescheduled(jobs, reschedulable)

    def _execute_timed(self, requests: list[InferenceRequest]) -> tuple[Any, tuple[int, int]]:
        """Runs in the instance thread: `execute`, plus the input/output preparation time
        the batch helpers measured on this thread (Triton's compute_input/output)."""
        take_phase_times()
        result = self.instance.execute(requests)
        return result, take_phase_times()

    def _execute_measured(self, requests: list[InferenceRequest], elements: int) -> tuple[Any, tuple[int, int]]:
        """`_execute_timed`, on the loop or in the thread, measured for the next choice."""
        assert self._inline_rule is not None
        began = time.monotonic_ns()
        try:
            return self._execute_timed(requests)
        finally:
            self._inline_rule.measured(elements, time.monotonic_ns() - began)

    def _deliver(self, result: Any, jobs: list[Job]) -> None:
        if not isinstance(result, (list, tuple)) or len(result) != len(jobs):
            got = (
                "None"
                if result is None
                else (f"{len(result)} responses" if isinstance(result, (list, tuple)) else type(result).__name__)
            )
            error = NaiadError.internal(
                f"model '{self.model_name}' returned {got} for a batch of {len(jobs)} requests; "
                "execute must return exactly one response per request"
            )
            for job in jobs:
                job.finish(self._stamp(InferenceResponse(error=error), job))
            return
        for job, response in zip(jobs, result):
            if job.request.reschedule:
                continue  # its place holds None; it answers in a later execution
            if not isinstance(response, InferenceResponse):
                response = InferenceResponse(
                    error=NaiadError.internal(
                        f"model '{self.model_name}' returned a {type(response).__name__} instead of a response"
                    )
                )
            response.final = True
            job.finish(self._stamp(response, job))

    def _take_rescheduled(self, jobs: list[Job], reschedulable: bool) -> list[Job]:
        """The jobs to queue again. As in Triton, each execution of a rescheduled request
        counts as a success (the last one when the request is answered); the request
        counts as pending, and waits in the queue, anew."""
        again = []
        for job in jobs:
            request = job.request
            if not request.reschedule:
                continue
            request.reschedule = False
            if job.done:  # it sent its final response after all: nothing is left to run
                continue
            if not reschedulable:
                log.error("model '%s': failed to release a request: %s", self.model_name, _NOT_RESCHEDULABLE)
                job.finish(self._stamp(InferenceResponse(error=NaiadError.invalid(_NOT_RESCHEDULABLE)), job))
                continue
            now = time.monotonic_ns()
            self.statistics.record_success(now - job.enqueued_ns)
            job.executed = False
            job.enqueued_ns = now
            self.statistics.pending += 1
            again.append(job)
        return again

    def _check_decoupled(self, result: Any, jobs: list[Job]) -> None:
        if result not in (None, [], ()):
            log.warning("decoupled model '%s' returned responses from execute; they are ignored", self.model_name)

    def _sender(self, loop: asyncio.AbstractEventLoop, job: Job):
        """The response sender a decoupled model calls, from any thread."""

        def send(response: InferenceResponse | None, final: bool = False) -> None:
            if response is None:
                if not final:
                    return
                # A bare "stream is over" marker: frontends forward it only to clients that
                # asked for empty final responses.
                response = InferenceResponse(parameters={"triton_final_response": True})
            response.final = final
            if not loop.is_closed():
                loop.call_soon_threadsafe(job.finish, self._stamp(response, job))

        return send

    def _stamp(self, response: InferenceResponse, job: Job) -> InferenceResponse:
        response.model_name = self.model_name
        response.model_version = self.version
        response.id = job.request.id
        return response

    def close(self) -> None:
        if self.gate is not None:
            self.gate.close()
        if self._executor is not None:
            self._executor.close()


def _element_count(jobs: list[Job]) -> int:
    """Input elements of a batch: every input of every request."""
    return sum(t.element_count for job in jobs for t in job.request.inputs)


def _trace_compute(jobs: list[Job], start: int, elapsed: int) -> None:
    """Give traced requests their queue and compute timestamps (one check when untraced)."""
    for job in jobs:
        if job.request.trace is not None:
            job.request.trace.compute(job.enqueued_ns, start, start + elapsed)
