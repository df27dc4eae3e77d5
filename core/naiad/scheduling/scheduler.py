"""The scheduler interface every scheduling policy implements."""

from __future__ import annotations

import abc

from .job import Job

__all__ = ["Scheduler"]


class Scheduler(abc.ABC):
    """Takes jobs and runs them on a model's instances.

    `enqueue` must not block: it queues the job (or rejects it by finishing it with an
    error) and returns. `start` runs on the event loop once the instances are ready;
    `stop` stops taking jobs, lets queued and running ones finish (or fails them after
    `timeout` seconds), and returns when no execution is in flight.
    """

    @abc.abstractmethod
    def enqueue(self, job: Job) -> None: ...

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self, timeout: float | None = None) -> None: ...
