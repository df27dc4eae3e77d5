"""`Job`: one request on its way through a scheduler, with where its responses go."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..inference import InferenceRequest, InferenceResponse

__all__ = ["Job"]


def _finished(response: InferenceResponse) -> None:
    """A finished job's `deliver`: later responses have nowhere to go."""


@dataclass(slots=True, eq=False)
class Job:
    """`deliver` is called on the event loop with each response; the one with
    `final=True` ends the job. `batch_size` is the request's count of inferences (0 for
    the padding requests a sequence batcher puts into empty slots).

    `deadline_ns` is the monotonic time after which a queue policy times the job out (0:
    never). `on_cancel` lets the scheduler holding the job hear about a cancellation at
    once instead of at its next queue scan.
    """

    request: InferenceRequest
    batch_size: int
    deliver: Callable[[InferenceResponse], None]
    enqueued_ns: int = field(default_factory=time.monotonic_ns)
    done: bool = False
    # Set when an instance takes the job: it no longer counts as pending.
    executed: bool = False
    deadline_ns: int = 0
    on_cancel: Callable[[Job], None] | None = None

    def finish(self, response: InferenceResponse) -> None:
        if self.done:
            return
        deliver = self.deliver
        if response.final:
            self.done = True
            # `deliver` is usually a closure that refers back to this job. Dropping it breaks
            # the cycle, so the request, its response and their tensors are freed by reference
            # counting at once; left to the cyclic collector they piled up into 25-35 ms
            # gen-2 pauses every second under load (docs/performance.md).
            self.deliver = _finished
            self.on_cancel = None
        deliver(response)

    def reject(self, response: InferenceResponse) -> None:
        """Finish with an error the scheduler decided on before any execution."""
        self.finish(response)

    def cancel(self) -> None:
        """The client went away: mark the request and tell the scheduler holding it."""
        self.request.cancelled = True
        if not self.done and self.on_cancel is not None:
            self.on_cancel(self)
