"""`preserve_ordering`: responses leave in the order their requests arrived.

Batches run on several instances and can finish out of order; each job's responses are
held back until every job that arrived before it has sent its final response. Jobs
that end without executing (rejected, cancelled) pass through the same gate, so
nothing waits forever.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..inference import InferenceResponse
from .job import Job

__all__ = ["ResponseOrdering"]


@dataclass(eq=False, slots=True)
class _Entry:
    deliver: Callable[[InferenceResponse], None]
    held: list[InferenceResponse] = field(default_factory=list)
    finished: bool = False


class ResponseOrdering:
    def __init__(self) -> None:
        self._entries: deque[_Entry] = deque()

    def track(self, job: Job) -> None:
        """Route `job`'s responses through the gate; call in arrival order."""
        entry = _Entry(job.deliver)
        self._entries.append(entry)
        job.deliver = lambda response: self._arrived(entry, response)

    def _arrived(self, entry: _Entry, response: InferenceResponse) -> None:
        if response.final:
            entry.finished = True
        if self._entries and self._entries[0] is entry:
            entry.deliver(response)
            if entry.finished:
                self._entries.popleft()
                self._release()
        else:
            entry.held.append(response)

    def _release(self) -> None:
        while self._entries:
            head = self._entries[0]
            for response in head.held:
                head.deliver(response)
            head.held.clear()
            if not head.finished:
                return
            self._entries.popleft()
