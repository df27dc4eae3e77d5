"""Whether an instance's next batch runs on the event loop instead of its own thread.

Handing a batch to the instance thread and its responses back costs two thread wake-ups
(measured 20-150 us per batch on a busy 2-core machine), far more than a small framework
call (onnxruntime runs a small MLP in ~8 us). A backend whose `execute` has no affinity to
its thread (`ModelInstance.runs_on_any_thread`) therefore gets its short batches run on the
loop, which stalls the loop no longer than the hop would have cost.

Short means: the last execution of this instance, scaled up to the elements this batch
carries when it carries more, took less than the budget. Every execution is measured, on the
loop or in the thread, so a model that turns slow moves to its thread after one batch and
one that turns fast comes back. The first batch always runs in the thread.
"""

from __future__ import annotations

__all__ = ["InlineExecution", "INLINE_BUDGET_NS"]

# The longest an execution may be predicted to take and still run on the loop: about what
# the hop to the instance thread and back costs, so the loop is never held much longer than
# the thread would have cost it.
INLINE_BUDGET_NS = 100_000


class InlineExecution:
    """The measurements and the decision for one instance that allows it."""

    __slots__ = ("_budget_ns", "_last_ns", "_last_elements")

    def __init__(self, budget_ns: int = INLINE_BUDGET_NS) -> None:
        self._budget_ns = budget_ns
        # None until the first execution is measured.
        self._last_ns: int | None = None
        self._last_elements = 1

    def choose(self, elements: int) -> bool:
        """Whether a batch of `elements` input elements (every input of every request)
        runs on the loop."""
        last = self._last_ns
        if last is None:
            return False
        if elements > self._last_elements:
            # Assume the cost grows with the data, never that it shrinks.
            last = last * elements // self._last_elements
        return last < self._budget_ns

    def measured(self, elements: int, elapsed_ns: int) -> None:
        self._last_ns = elapsed_ns
        self._last_elements = max(elements, 1)
