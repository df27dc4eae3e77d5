"""Whether an instance's next batch runs on the event loop instead of its own thread.

Handing a batch to the instance thread and its responses back costs two thread wake-ups
(measured 20-150 us per batch on a busy 2-core machine), far more than a small framework
call (onnxruntime runs a small MLP in ~8 us). A backend whose `execute` has no affinity to
its thread (`ModelInstance.runs_on_any_thread`) therefore gets its short batches run on the
loop, which stalls the loop no longer than the hop would have cost.

Short means: the faster of the instance's last two executions, scaled up to the elements
this batch carries when it carries more, took less than the budget. Two, because on a busy
machine one execution in a few dozen is preempted and measures long, and each such outlier
would cost the next batch a hop; a model that turns slow moves to its thread after two
batches. Every execution is measured, on the loop or in the thread, so one that turns fast
comes back. The first batch always runs in the thread.

A batch that holds every request the server has in flight may take longer on the loop
(ALONE_BUDGET_NS): no other request waits for the loop meanwhile, so the hop would only add
its cost to the one request being served (the CNN of bench/cnn_bench.py at one connection,
0.2-0.3 ms per image: +4% to +47% images/s, median +13%, in six alternating rounds). A
request that arrives during such an execution waits for it, at most about ALONE_BUDGET_NS.
"""

from __future__ import annotations

__all__ = ["InlineExecution", "INLINE_BUDGET_NS", "ALONE_BUDGET_NS"]

# The longest an execution may be predicted to take and still run on the loop: about what
# the hop to the instance thread and back costs, so the loop is never held much longer than
# the thread would have cost it.
INLINE_BUDGET_NS = 100_000
# The longest a batch that holds every request in flight may be predicted to take on the loop.
ALONE_BUDGET_NS = 2_000_000


class InlineExecution:
    """The measurements and the decision for one instance that allows it."""

    __slots__ = ("_budget_ns", "_alone_budget_ns", "_last", "_previous")

    def __init__(self, budget_ns: int = INLINE_BUDGET_NS, alone_budget_ns: int = ALONE_BUDGET_NS) -> None:
        self._budget_ns = budget_ns
        self._alone_budget_ns = alone_budget_ns
        # (elapsed ns, input elements) of the last two executions; None until measured.
        self._last: tuple[int, int] | None = None
        self._previous: tuple[int, int] | None = None

    def choose(self, elements: int, alone: bool = False) -> bool:
        """Whether a batch of `elements` input elements (every input of every request)
        runs on the loop; `alone`: the batch holds every request the server has in flight."""
        if self._last is None:
            return False
        predicted = _scaled(self._last, elements)
        if self._previous is not None:
            predicted = min(predicted, _scaled(self._previous, elements))
        return predicted < (self._alone_budget_ns if alone else self._budget_ns)

    def measured(self, elements: int, elapsed_ns: int) -> None:
        self._previous = self._last
        self._last = (elapsed_ns, max(elements, 1))


def _scaled(measurement: tuple[int, int], elements: int) -> int:
    """A measured time for `elements`: the cost is assumed to grow with the data, never to
    shrink with it."""
    elapsed_ns, measured_elements = measurement
    if elements > measured_elements:
        return elapsed_ns * elements // measured_elements
    return elapsed_ns
