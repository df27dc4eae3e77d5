"""The two searches of `naiad tune`.

quick (the default) searches as a person would: start at the cheapest point, grow one
dimension at a time (in `GROWTH_ORDER`) while growing it pays (each step at least `min_gain`
better than the best so far), stop a dimension after three steps in a row that did not pay,
then hill-climb from the best point (move to the first neighbour that pays `climb_gain` more,
until none does: one step along one dimension, or a trade of instances for threads). brute measures every point of the
space, and only runs when asked.

Both score a candidate by its best throughput within the constraints
(`objectives.throughput_score`); both measure a point at most once (`Evaluations` remembers,
and the checkpoint fills it in on resume).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from .constraints import Constraints
from .objectives import throughput_score
from .results import CandidateResult
from .space import Candidate, SearchSpace

__all__ = ["Evaluations", "SearchProgress", "brute_search", "quick_search"]

DEFAULT_MIN_GAIN = 0.03
# A move of the hill-climb must pay more than a step of growing: it leaves a point the search
# chose for one it has measured once, and a shared machine's windows differ by a few percent.
DEFAULT_CLIMB_GAIN = 0.05
# Steps in a row that did not pay before a dimension stops growing.
PATIENCE = 3
# The order quick grows the dimensions in. The framework's threads first: one instance with
# every CPU is where a person starts, and instances grown before threads stop at several
# one-thread instances that no single step leaves (each step alone oversubscribes the CPUs).
# Then batching, which costs nothing, then instances, which take CPUs from the threads, then
# the queue delay, a fine adjustment of the batching found by then.
GROWTH_ORDER = (
    "intra_op_threads",
    "inter_op_threads",
    "max_batch_size",
    "preferred_batch_size",
    "instances",
    "max_queue_delay_us",
    "workers",
)


class SearchProgress(Protocol):
    def measured(self, result: CandidateResult, done: int, expected: int) -> None:
        """A candidate was measured (or read back from the checkpoint): `done` candidates so
        far, about `expected` in all (brute: exact; quick: its estimate now)."""


@dataclass(slots=True)
class Evaluations:
    """The candidates a search has visited, in order, each measured at most once: a candidate
    in `stored` (read back from a checkpoint) is not measured again."""

    evaluate: Callable[[Candidate], Awaitable[CandidateResult]]
    constraints: Constraints
    progress: SearchProgress | None = None
    stored: dict[str, CandidateResult] = field(default_factory=dict)
    visited: dict[str, CandidateResult] = field(default_factory=dict)
    # What the search expects to visit in all: updated as it learns.
    expected: int = 0

    async def score(self, candidate: Candidate) -> float:
        result = self.visited.get(candidate.key)
        if result is None:
            result = self.stored.get(candidate.key)
            if result is None:
                result = await self.evaluate(candidate)
            self.visited[candidate.key] = result
            self.expected = max(self.expected, len(self.visited))
            if self.progress is not None:
                self.progress.measured(result, len(self.visited), self.expected)
        return throughput_score(result, self.constraints)

    def known(self, candidate: Candidate) -> bool:
        return candidate.key in self.visited

    def results(self) -> list[CandidateResult]:
        return list(self.visited.values())


async def brute_search(space: SearchSpace, evaluations: Evaluations) -> list[CandidateResult]:
    evaluations.expected = space.size()
    for candidate in space.candidates():
        await evaluations.score(candidate)
    return evaluations.results()


async def quick_search(
    space: SearchSpace,
    evaluations: Evaluations,
    min_gain: float = DEFAULT_MIN_GAIN,
    climb_gain: float = DEFAULT_CLIMB_GAIN,
) -> list[CandidateResult]:
    def pays(score: float, over: float, gain: float = min_gain) -> bool:
        return score > over * (1 + gain) if over > 0 else score > 0

    size = space.size()

    def expect(remaining_dimensions: int) -> None:
        # About two steps per dimension still to grow, and one round of neighbours.
        guess = len(evaluations.visited) + 2 * remaining_dimensions + len(space.names)
        evaluations.expected = min(size, guess)

    best = space.start()
    expect(len(space.names))
    best_score = await evaluations.score(best)
    growth = sorted(space.names, key=GROWTH_ORDER.index)
    for index, name in enumerate(growth):
        expect(len(growth) - index)
        point, flat = space.step(best, name, +1), 0
        while point is not None:
            score = await evaluations.score(point)
            if pays(score, best_score):
                best, best_score, flat = point, score, 0
            else:
                # Stopped paying: two steps further before giving the dimension up, since a
                # measurement may be a noisy window and some settings pay only together (a
                # larger batch only pays once there are clients enough to fill it).
                flat += 1
                if flat == PATIENCE:
                    break
            point = space.step(point, name, +1)

    def moves(point: Candidate) -> list[Candidate]:
        return space.neighbours(point) + space.trades(point, "instances", "intra_op_threads")

    while True:
        untried = [n for n in moves(best) if not evaluations.known(n)]
        evaluations.expected = min(size, len(evaluations.visited) + len(untried))
        # First improvement: move to the first neighbour that pays, without measuring the rest
        # of this round (the next round starts from the new point anyway).
        for neighbour in moves(best):
            score = await evaluations.score(neighbour)
            if pays(score, best_score, climb_gain):
                best, best_score = neighbour, score
                break
        else:
            break
    return evaluations.results()
