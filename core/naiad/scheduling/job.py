"""`Job`: one request on its way through a scheduler, with where its responses go."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..inference import InferenceRequest, InferenceResponse

__all__ = ["Job"]


@dataclass(slots=True, eq=False)
class Job:
    """`deliver` is called on the event loop with each response; the one with
    `final=True` ends the job. `batch_size` is the request's count of inferences."""

    request: InferenceRequest
    batch_size: int
    deliver: Callable[[InferenceResponse], None]
    enqueued_ns: int = field(default_factory=time.monotonic_ns)
    done: bool = False
    # Set when an instance takes the job: it no longer counts as pending.
    executed: bool = False

    def finish(self, response: InferenceResponse) -> None:
        if self.done:
            return
        if response.final:
            self.done = True
        self.deliver(response)
