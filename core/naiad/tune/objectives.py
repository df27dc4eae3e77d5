"""The two answers tune gives, read from every candidate it measured: the best throughput
under the latency budget, and the best p99 at the throughput floor; and the Pareto front of
throughput against p99 the report draws."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .constraints import Constraints
from .results import CandidateResult, Step

__all__ = ["Choice", "best_latency", "best_throughput", "pareto_front", "throughput_score"]


@dataclass(frozen=True, slots=True)
class Choice:
    """One candidate at one of its concurrency steps."""

    result: CandidateResult
    step: Step


def throughput_score(result: CandidateResult, constraints: Constraints) -> float:
    """What the search maximises: the candidate's best throughput at a step within the latency
    budget (0 when it failed to load, broke the memory ceiling or has no such step)."""
    choice = _best_throughput_step(result, constraints)
    return 0.0 if choice is None else choice.throughput


def _best_throughput_step(result: CandidateResult, constraints: Constraints) -> Step | None:
    if not result.loaded or not constraints.within_memory(result):
        return None
    steps = [step for step in result.steps if constraints.within_budget(step)]
    return max(steps, key=lambda step: step.throughput, default=None)


def best_throughput(results: Iterable[CandidateResult], constraints: Constraints) -> Choice | None:
    """The highest throughput at a step with p99 within the budget, memory within the ceiling."""
    best: Choice | None = None
    for result in results:
        step = _best_throughput_step(result, constraints)
        if step is not None and (best is None or step.throughput > best.step.throughput):
            best = Choice(result, step)
    return best


def best_latency(results: Iterable[CandidateResult], constraints: Constraints) -> Choice | None:
    """The lowest p99 at a step that reaches the throughput floor (any step when no floor is
    set), memory within the ceiling."""
    floor = constraints.min_throughput or 0.0
    best: Choice | None = None
    for result in results:
        if not result.loaded or not constraints.within_memory(result):
            continue
        for step in result.steps:
            if step.errors == 0 and step.throughput >= floor and (best is None or step.p99_ms < best.step.p99_ms):
                best = Choice(result, step)
    return best


def pareto_front(results: Iterable[CandidateResult]) -> list[Choice]:
    """The steps no other step beats on both throughput (higher) and p99 (lower), by
    throughput: each is the fastest way to reach its throughput."""
    choices = [Choice(r, s) for r in results if r.loaded for s in r.steps if s.errors == 0]
    choices.sort(key=lambda c: (-c.step.throughput, c.step.p99_ms))
    front: list[Choice] = []
    for choice in choices:
        if not front or choice.step.p99_ms < front[-1].step.p99_ms:
            front.append(choice)
    return sorted(front, key=lambda c: c.step.throughput)
