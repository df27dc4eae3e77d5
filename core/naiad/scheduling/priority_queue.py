"""The dynamic batcher's queue: priority levels, each with its queue policy.

Level 1 is the highest priority. A request's `priority` picks its level; 0 (not set) or
a value above `priority_levels` means `default_priority_level`, as in Triton. Each level
applies its `ModelQueuePolicy`: `max_queue_size` (0: unbounded) rejects new requests
with UNAVAILABLE when the level is full; a timeout (`default_timeout_microseconds`, or
the request's own `timeout` when `allow_timeout_override` lets it shorten a non-zero
default)
either rejects the request once it has waited that long (REJECT) or moves it behind
every request of its level that has not timed out (DELAY).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import NaiadError
from ..inference import InferenceResponse
from ..protos import model_config_pb2 as pb
from .job import Job

__all__ = ["QueuePolicy", "PriorityQueue"]


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    max_queue_size: int = 0
    default_timeout_us: int = 0
    allow_timeout_override: bool = False
    delay_on_timeout: bool = False

    @classmethod
    def from_proto(cls, policy: pb.ModelQueuePolicy) -> QueuePolicy:
        return cls(
            max_queue_size=policy.max_queue_size,
            default_timeout_us=policy.default_timeout_microseconds,
            allow_timeout_override=policy.allow_timeout_override,
            delay_on_timeout=policy.timeout_action == pb.ModelQueuePolicy.DELAY,
        )

    def timeout_us(self, requested_us: int) -> int:
        """The timeout a request gets: a request may shorten the default, never extend it.
        Without a default there is nothing to shorten, so requests get no timeout (as in
        Triton, checked against the real server)."""
        if self.allow_timeout_override and 0 < requested_us < self.default_timeout_us:
            return requested_us
        return self.default_timeout_us


@dataclass(eq=False, slots=True)
class _Level:
    number: int
    policy: QueuePolicy
    waiting: deque[Job] = field(default_factory=deque)
    # Timed-out jobs under the DELAY action: served after every job in `waiting`.
    delayed: deque[Job] = field(default_factory=deque)

    def __len__(self) -> int:
        return len(self.waiting) + len(self.delayed)


class PriorityQueue:
    """Jobs by priority level, in arrival order within a level."""

    def __init__(self, model_name: str, batching: pb.ModelDynamicBatching) -> None:
        self.model_name = model_name
        default = QueuePolicy.from_proto(batching.default_queue_policy)
        count = max(int(batching.priority_levels), 1)
        self.default_level = int(batching.default_priority_level) if batching.priority_levels else 1
        self._levels = [
            _Level(
                n,
                QueuePolicy.from_proto(batching.priority_queue_policy[n])
                if n in batching.priority_queue_policy
                else default,
            )
            for n in range(1, count + 1)
        ]
        self._size = 0
        # Jobs that carry a deadline, and the earliest deadline: scans for expired jobs
        # only run once it has passed.
        self._timed = 0
        self._next_deadline: int | None = None

    def __len__(self) -> int:
        return self._size

    def level_of(self, priority: int) -> int:
        if priority == 0 or priority > len(self._levels):
            return self.default_level
        return priority

    def push(self, job: Job) -> bool:
        """Queue `job`, or reject it (finishing it) when its level is full."""
        level = self._levels[self.level_of(job.request.priority) - 1]
        policy = level.policy
        if policy.max_queue_size and len(level) >= policy.max_queue_size:
            job.reject(
                InferenceResponse(
                    error=NaiadError.unavailable(
                        f"model '{self.model_name}': request rejected, the queue of priority level "
                        f"{level.number} is full (max_queue_size {policy.max_queue_size})"
                    )
                )
            )
            return False
        timeout_us = policy.timeout_us(job.request.timeout_us)
        if timeout_us:
            job.deadline_ns = job.enqueued_ns + timeout_us * 1000
            self._timed += 1
            if self._next_deadline is None or job.deadline_ns < self._next_deadline:
                self._next_deadline = job.deadline_ns
        level.waiting.append(job)
        self._size += 1
        return True

    def __iter__(self) -> Iterator[Job]:
        """Jobs in the order batches take them: by level, waiting before delayed."""
        for level in self._levels:
            yield from level.waiting
            yield from level.delayed

    def take(self, count: int) -> None:
        """Remove the first `count` jobs of the iteration order (the batch just formed)."""
        for level in self._levels:
            for queue in (level.waiting, level.delayed):
                while count and queue:
                    job = queue.popleft()
                    self._forget(job)
                    count -= 1
            if not count:
                return

    def _forget(self, job: Job) -> None:
        self._size -= 1
        if job.deadline_ns:
            self._timed -= 1

    def sweep(self, now_ns: int) -> int | None:
        """Drop cancelled and finished jobs, apply timeouts; return the next deadline."""
        next_deadline: int | None = None
        for level in self._levels:
            kept: deque[Job] = deque()
            for job in level.waiting:
                if job.done or job.request.cancelled:
                    self._drop_cancelled(job)
                elif job.deadline_ns and job.deadline_ns <= now_ns:
                    if level.policy.delay_on_timeout:
                        # Delayed jobs keep no deadline: they wait behind the others instead.
                        self._timed -= 1
                        job.deadline_ns = 0
                        level.delayed.append(job)
                    else:
                        self._forget(job)
                        job.reject(
                            InferenceResponse(
                                error=NaiadError.unavailable(
                                    f"model '{self.model_name}': request timed out in the queue after "
                                    f"{(now_ns - job.enqueued_ns) // 1000} us"
                                )
                            )
                        )
                else:
                    kept.append(job)
                    if job.deadline_ns and (next_deadline is None or job.deadline_ns < next_deadline):
                        next_deadline = job.deadline_ns
            level.waiting = kept
            if any(job.done or job.request.cancelled for job in level.delayed):
                survivors: deque[Job] = deque()
                for job in level.delayed:
                    if job.done or job.request.cancelled:
                        self._drop_cancelled(job)
                    else:
                        survivors.append(job)
                level.delayed = survivors
        self._next_deadline = next_deadline
        return next_deadline

    def next_deadline(self) -> int | None:
        return self._next_deadline if self._timed else None

    def needs_sweep(self, now_ns: int) -> bool:
        deadline = self.next_deadline()
        return deadline is not None and now_ns >= deadline

    def _drop_cancelled(self, job: Job) -> None:
        self._forget(job)
        job.finish(InferenceResponse(error=NaiadError.cancelled_request()))

    def drain(self) -> list[Job]:
        jobs = list(self)
        for level in self._levels:
            level.waiting.clear()
            level.delayed.clear()
        self._size = 0
        self._timed = 0
        self._next_deadline = None
        return jobs
