"""When to send a batch, and which requests go in it.

Shared by the dynamic batcher and the sequence batcher's `oldest` strategy. The rules
are Triton's (model_configuration.md, "Preferred Batch Sizes" and "Delayed Batching";
the dynamic batcher of Triton's core settles the details). A batch is looked for only
when an instance is free; the queue is then walked in order:

1. A batch holds whole requests, in queue order; a request is never split and never
   overtaken. A request that would take the batch past `max_batch_size`, or whose shapes
   differ from the batch's, ends the walk.
2. The walk remembers the *best* batch: the longest prefix whose size is a preferred size,
   or, when a request would take the batch past the largest preferred size and no
   preferred size was reached before, the prefix before that request.
3. If there is a best batch and the oldest request has not waited `max_queue_delay`, the
   best batch is sent now (a lone request of a preferred size is not held back).
4. Otherwise everything walked is sent now when the walk was ended by a request that
   did not fit, when it reached the largest preferred size, when the delay has passed (then
   up to `max_batch_size`, past the largest preferred size), or when there is no delay.
5. Otherwise the batcher waits for more requests until the oldest has waited the delay.

With no `preferred_batch_size` in the config, the config defaults make it
`[max_batch_size]` (as Triton's do), so "the largest preferred size" is always defined.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

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
    def largest_preferred(self) -> int:
        return max(self.preferred_batch_sizes) if self.preferred_batch_sizes else self.max_batch_size

    def decide(self, candidates: Iterable[Job], now_ns: int) -> BatchDecision:
        """Look at the queued `candidates` in order and decide what to send (rules above)."""
        gathered: list[Job] = []
        total = 0
        best = 0  # jobs in the best batch (rule 2); 0: none yet
        ended_by_misfit = False
        largest = self.largest_preferred
        signature = self.signature
        first: Hashable = None
        for job in candidates:
            # A padding job of a sequence batcher (size 0) still takes a row.
            size = max(job.batch_size, 1)
            if gathered:
                if total + size > largest and not best:
                    best = len(gathered)
                if total + size > self.max_batch_size or (signature is not None and signature(job) != first):
                    ended_by_misfit = True
                    break
            elif signature is not None:
                first = signature(job)
            gathered.append(job)
            total += size
            if total in self.preferred_batch_sizes:
                best = len(gathered)
        if not gathered:
            return BatchDecision([])
        oldest = min(job.enqueued_ns for job in gathered)
        send_at = oldest + self.max_queue_delay_ns
        delay_passed = self.max_queue_delay_ns > 0 and now_ns >= send_at
        if best and not delay_passed:
            return BatchDecision(gathered[:best])
        if ended_by_misfit or total >= largest or delay_passed or self.max_queue_delay_ns == 0:
            return BatchDecision(gathered)
        return BatchDecision([], send_at)
