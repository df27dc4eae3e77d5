"""When to send a batch, and which requests go in it.

Shared by the dynamic batcher and the sequence batcher's `oldest` strategy. The rules,
as Triton's documentation states them for `dynamic_batching`:

* A batch holds whole requests, in queue order, up to `max_batch_size` inferences; a
  request that does not fit (or whose shapes differ from the batch's) ends the batch
  there: requests are never split and never overtaken.
* A batch that reached the largest preferred size (or `max_batch_size` when none is
  preferred), or that cannot grow because the next request does not fit, is sent at
  once, cut back to the largest preferred size it passed on the way if there is one.
* Otherwise the batcher waits for more requests, but never longer than
  `max_queue_delay` after the oldest request in the batch arrived; then it sends what it
  has. A delay of 0 sends at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Sequence

from .job import Job

__all__ = ["BatchPolicy", "BatchDecision"]


@dataclass(frozen=True, slots=True)
class BatchDecision:
    """`jobs` to execute now (empty: nothing yet), else look again at `wake_ns`."""

    jobs: list[Job]
    wake_ns: int | None = None


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_ns: int = 0
    # Jobs share a batch only when their signatures are equal (same shapes of
    # non-ragged inputs...); None batches anything together.
    signature: Callable[[Job], Hashable] | None = None

    @property
    def target(self) -> int:
        return max(self.preferred_batch_sizes) if self.preferred_batch_sizes else self.max_batch_size

    def decide(self, candidates: Iterable[Job], now_ns: int) -> BatchDecision:
        """Look at the queued `candidates` in order and decide what to send."""
        gathered: list[Job] = []
        total = 0
        blocked = False
        target = self.target
        signature = self.signature
        first: Hashable = None
        for job in candidates:
            if gathered:
                if total + job.batch_size > self.max_batch_size or (
                    signature is not None and signature(job) != first
                ):
                    blocked = True
                    break
            elif signature is not None:
                first = signature(job)
            gathered.append(job)
            total += job.batch_size
            if total >= target:
                break
        if not gathered:
            return BatchDecision([])
        if total >= target or blocked:
            return BatchDecision(self._cut_to_preferred(gathered))
        oldest = min(job.enqueued_ns for job in gathered)
        send_at = oldest + self.max_queue_delay_ns
        if self.max_queue_delay_ns == 0 or now_ns >= send_at:
            return BatchDecision(gathered)
        return BatchDecision([], send_at)

    def _cut_to_preferred(self, gathered: Sequence[Job]) -> list[Job]:
        if not self.preferred_batch_sizes:
            return list(gathered)
        best = 0
        total = 0
        for count, job in enumerate(gathered, 1):
            total += job.batch_size
            if total in self.preferred_batch_sizes:
                best = count
        return list(gathered[:best]) if best else list(gathered)
