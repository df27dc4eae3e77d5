"""`dynamic_batching { }`: combines queued requests into batches for free instances.

One dispatcher task watches the queue. Whenever something changes (a request arrives, an
instance becomes free, a request is cancelled, a delay or timeout runs out) it applies
the queue policies and, while an instance is free, asks `BatchPolicy` whether a batch
should go now. Batches only form when an instance is free to take them, so under load
requests pile up and batches grow by themselves, even with no queue delay configured.
An execution that ends with requests queued starts the next batch itself when the policy
sends it at once, so the instance does not wait for the dispatcher's turn (see `_execute`).
"""

from __future__ import annotations

import asyncio
from collections import deque

from ..config.model_config import ModelConfig
from ..errors import NaiadError
from ..inference import InferenceResponse
from .batch_compatibility import BatchSignature
from .batch_policy import BatchPolicy
from .clock import Cancellable, Clock, DeadlineTimer, SystemClock
from .instance_runner import InstanceRunner
from .job import Job
from .loop_event import LoopEvent
from .priority_queue import PriorityQueue
from .response_ordering import ResponseOrdering
from .scheduler import Scheduler

__all__ = ["DynamicBatcher"]

# A time after every queue delay: what the batch policy is asked at shutdown.
_FLUSH = 2**63
# The event loop's timers count whole milliseconds (uvloop rounds a shorter delay down to 0,
# so waiting for one spins the loop until it is due; asyncio rounds it up to 1 ms). A queue
# delay that ends sooner than this is waited for with a PreciseTimer while the requests the
# batch still expects are on their way (see _dispatch); otherwise, or where there is no such
# timer, as two turns of the loop, which let the requests already received join the batch,
# and then it counts as over.
_TIMER_RESOLUTION_NS = 1_000_000


class DynamicBatcher(Scheduler):
    """The batcher of one model version; `clock` is where it reads the time and sets its
    wake-ups (clock.py; the system's when not given)."""

    def __init__(self, config: ModelConfig, runners: list[InstanceRunner], clock: Clock | None = None) -> None:
        settings = config.proto.dynamic_batching
        self._clock: Clock = clock if clock is not None else SystemClock()
        batching = config.max_batch_size > 0
        self._model_name = config.name
        self._queue = PriorityQueue(config.name, settings)
        # A model without a batch dimension still gets queue policies and priorities,
        # one request per execution.
        self._policy = BatchPolicy(
            max_batch_size=config.max_batch_size if batching else 1,
            preferred_batch_sizes=tuple(sorted(set(settings.preferred_batch_size))) if batching else (),
            max_queue_delay_ns=settings.max_queue_delay_microseconds * 1000,
            signature=BatchSignature(config).of,
        )
        self._ordering = ResponseOrdering() if settings.preserve_ordering else None
        self._runners = runners
        self._free: deque[InstanceRunner] = deque(runners)
        self._executions: set[asyncio.Task[None]] = set()
        self._changed = LoopEvent()
        self._sweep_requested = False
        self._accepting = False
        self._dispatcher: asyncio.Task[None] | None = None
        # How many requests the last execution answered: under closed-loop load (clients that
        # send again once answered), how many are about to arrive again.
        self._expected = 0
        self._precise: DeadlineTimer | None = None
        # The loop it serves on, set by start: its executions' tasks are made there directly.
        # (asyncio.create_task looks the running loop up, and CPython 3.11 then asks the
        # kernel for the process id: a system call per batch.)
        self._loop: asyncio.AbstractEventLoop | None = None

    def enqueue(self, job: Job) -> None:
        if not self._accepting:
            job.reject(
                InferenceResponse(error=NaiadError.unavailable(f"model '{self._model_name}' is not accepting requests"))
            )
            return
        if self._ordering is not None:
            self._ordering.track(job)
        job.on_cancel = self._cancelled
        # While every instance is busy the dispatcher has nothing to do with a new request
        # until one is free (that wakes it), unless the request's deadline may need an
        # earlier wake-up; not waking it spares a pass per request under load.
        if self._queue.push(job) and (self._free or job.deadline_ns):
            self._changed.set()

    def _cancelled(self, job: Job) -> None:
        self._sweep_requested = True
        self._changed.set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._accepting = True
        self._precise = self._clock.precise_timer(self._changed.set)
        self._dispatcher = asyncio.create_task(self._dispatch(), name=f"naiad-batcher-{self._model_name}")

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        clock = self._clock
        delay_over_at = 0  # a queue delay waited for as one turn of the loop ends here
        while True:
            now = clock.monotonic_ns()
            if self._sweep_requested or self._queue.needs_sweep(now):
                self._sweep_requested = False
                self._queue.sweep(now)
            # Wake up for the next timeout even while every instance is busy.
            wake = self._queue.next_deadline()
            # Once stopping, nothing waits for more requests: flush what is queued.
            delay_wake = self._start_batches(max(now, delay_over_at) if self._accepting else _FLUSH)
            if delay_wake is not None:
                wake = delay_wake if wake is None else min(wake, delay_wake)
            if not self._accepting and not len(self._queue) and len(self._free) == len(self._runners):
                return
            self._changed.clear()
            timer: Cancellable | None = None
            delay_over_at = 0
            precise_at = 0
            if wake is not None:
                wait_ns = wake - clock.monotonic_ns()
                if wake == delay_wake and self._precise is not None and len(self._queue) < self._expected:
                    # Fewer queued than the last execution answered: at a few clients in a
                    # closed loop, the rest are on their way back, a few tens of us apart.
                    # Sending without them leaves them a whole execution behind (and the
                    # two groups then tend to keep taking turns). So the batch waits for
                    # them (each arrival wakes this task), at most until the queue delay
                    # is over, as Triton's batcher would.
                    precise_at = wake
                elif wait_ns < _TIMER_RESOLUTION_NS and wake == delay_wake:
                    delay_over_at = wake
                    # The set runs a turn from now and this task resumes a turn after it:
                    # the loop reads sockets twice before the batch forms. Reading once
                    # (sleep(0)) made batches smaller: 8 clients over 2 workers fell from
                    # 15.1k to 12.0k req/s.
                    timer = loop.call_soon(self._changed.set)
                else:
                    timer = clock.call_at(wake, self._changed.set)
            if self._precise is not None and self._precise.due_ns != precise_at:
                self._precise.set(precise_at)
            await self._changed.wait()
            if timer is not None:
                timer.cancel()

    def _start_batches(self, decide_at: int) -> int | None:
        """Start every batch the policy sends at `decide_at` while an instance is free; the
        time the policy wants to look again when it holds the queue for a delay, else None."""
        while self._free and len(self._queue):
            try:
                decision = self._policy.decide(self._queue, decide_at)
            except Exception as exc:  # noqa: BLE001 - one bad request must not stop the batcher
                self._fail_head(exc)
                continue
            if not decision.jobs:
                return decision.wake_ns
            jobs = decision.jobs
            self._queue.take(len(jobs))
            runner = self._free[0]
            if runner.run_now(jobs) is not None:
                # It ran on the loop (a short batch) and is free again.
                self._expected = len(jobs)
                decide_at = max(decide_at, self._clock.monotonic_ns())
                continue
            self._free.popleft()
            assert self._loop is not None
            task = self._loop.create_task(self._execute(runner, jobs))
            self._executions.add(task)
            task.add_done_callback(self._executions.discard)
        return None

    def _fail_head(self, exc: Exception) -> None:
        head = next(iter(self._queue))
        self._queue.take(1)
        head.finish(
            InferenceResponse(
                error=NaiadError.internal(
                    f"model '{self._model_name}' could not batch a request: {type(exc).__name__}: {exc}"
                )
            )
        )

    async def _execute(self, runner: InstanceRunner, jobs: list[Job]) -> None:
        freed = False

        def free() -> None:
            nonlocal freed
            if not freed:
                freed = True
                self._instance_free(runner, len(jobs))

        try:
            await runner.run(jobs, on_free=free)
        finally:
            free()  # when the runner raised (cancelled) before it could say so

    def _instance_free(self, runner: InstanceRunner, answered: int) -> None:
        """`runner` finished a batch of `answered` requests (an instance thread's answers are
        not handed out yet: see `InstanceRunner.run`)."""
        self._expected = answered
        self._free.append(runner)
        if len(self._queue) and self._accepting and not self._sweep_requested:
            # The next batch starts now, without waiting for the dispatcher's turn: the
            # instance would idle meanwhile. A batch the policy holds for its queue delay,
            # or a queue with requests to drop first, is left to the dispatcher (woken below).
            now = self._clock.monotonic_ns()
            if not self._queue.needs_sweep(now):
                self._start_batches(now)
        # With nothing queued the dispatcher has nothing to give the free instance (the
        # next arrival wakes it); a pass here would cost every lone request one more.
        if len(self._queue) or not self._accepting or self._sweep_requested:
            self._changed.set()

    async def stop(self, timeout: float | None = None) -> None:
        self._accepting = False
        self._changed.set()
        if self._dispatcher is not None:
            done, _ = await asyncio.wait([self._dispatcher], timeout=timeout)
            if not done:
                self._dispatcher.cancel()
                for task in list(self._executions):
                    task.cancel()
        if self._precise is not None:
            self._precise.close()
            self._precise = None
        for job in self._queue.drain():
            job.reject(InferenceResponse(error=NaiadError.unavailable(f"model '{self._model_name}' was unloaded")))
