"""The searches of naiad.tune on a known landscape: a made-up throughput per point, so what
each search finds and how many points it measures are exact. (The searches against a real
server and model are in test_tune_command.py.)"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from naiad.tune.constraints import Constraints
from naiad.tune.results import CandidateResult, Step
from naiad.tune.search import Evaluations, brute_search, quick_search
from naiad.tune.space import Candidate, Dimension, SearchSpace

SPACE = SearchSpace(
    (
        Dimension("instances", (1, 2, 3, 4)),
        Dimension("max_batch_size", (1, 4, 16, 64)),
        Dimension("max_queue_delay_us", (0, 100, 1000)),
        Dimension("intra_op_threads", (1, 2)),
    )
)


def landscape(candidate: Candidate) -> tuple[float, float]:
    """(throughput, p99 ms) of a point: two instances and big batches pay, a long queue delay
    pays only with big batches and costs latency, more than two instances or threads on two
    CPUs costs a little."""
    instances, batch = candidate["instances"], candidate["max_batch_size"]
    delay, threads = candidate.get("max_queue_delay_us", 0), candidate.get("intra_op_threads", 1)
    rate = 100.0 * min(instances, 2) * (1 + batch.bit_length() / 2)
    rate *= 0.95 ** max(0, instances - 2) * (0.97 if threads == 2 else 1.0)
    rate *= 1.1 if delay and batch >= 16 else 1.0
    p99 = 2.0 + delay / 250 + batch / 16
    return rate, p99


def run(search, constraints: Constraints, stored: dict[str, CandidateResult] | None = None, space: SearchSpace = SPACE):
    measured: list[str] = []

    async def evaluate(candidate: Candidate) -> CandidateResult:
        measured.append(candidate.key)
        rate, p99 = landscape(candidate)
        step = Step(concurrency=4, throughput=rate, p50_ms=p99 / 2, p99_ms=p99, avg_ms=p99 / 2)
        return CandidateResult(candidate, True, steps=(step,), seconds=1.0)

    evaluations = Evaluations(evaluate, constraints, stored=dict(stored or {}))
    results = asyncio.run(search(space, evaluations))
    return results, measured


def best(results: list[CandidateResult]) -> str:
    return max(results, key=lambda r: r.steps[0].throughput if r.loaded else 0.0).candidate.key


def test_the_space_lists_every_point_once_and_steps_along_one_dimension():
    assert SPACE.size() == 4 * 4 * 3 * 2
    assert len({c.key for c in SPACE.candidates()}) == SPACE.size()
    start = SPACE.start()
    assert start.key == "instances=1,max_batch_size=1,max_queue_delay_us=0,intra_op_threads=1"
    assert [n.key for n in SPACE.neighbours(start)] == [
        "instances=2,max_batch_size=1,max_queue_delay_us=0,intra_op_threads=1",
        "instances=1,max_batch_size=4,max_queue_delay_us=0,intra_op_threads=1",
        "instances=1,max_batch_size=1,max_queue_delay_us=100,intra_op_threads=1",
        "instances=1,max_batch_size=1,max_queue_delay_us=0,intra_op_threads=2",
    ]


def test_a_preferred_batch_size_above_the_maximum_is_not_a_point():
    space = SearchSpace((Dimension("max_batch_size", (4, 8)), Dimension("preferred_batch_size", (0, 4, 8))))
    assert [c.key for c in space.candidates()] == [
        "max_batch_size=4,preferred_batch_size=0",
        "max_batch_size=4,preferred_batch_size=4",
        "max_batch_size=8,preferred_batch_size=0",
        "max_batch_size=8,preferred_batch_size=4",
        "max_batch_size=8,preferred_batch_size=8",
    ]


def test_bad_dimensions_are_refused_with_their_name():
    with pytest.raises(ValueError, match="unknown dimension 'threads'"):
        Dimension("threads", (1,))
    with pytest.raises(ValueError, match="dimension 'instances' repeats a value: \\[1, 1\\]"):
        Dimension("instances", (1, 1))


def test_brute_measures_every_point_and_quick_finds_the_same_best_with_a_fifth_of_them():
    everything, brute_measured = run(brute_search, Constraints())
    assert len(brute_measured) == SPACE.size() == 96
    top = best(everything)
    assert top == "instances=2,max_batch_size=64,max_queue_delay_us=100,intra_op_threads=1"
    found, quick_measured = run(quick_search, Constraints())
    assert best(found) == top
    assert len(quick_measured) == len(set(quick_measured))  # never the same point twice
    assert len(quick_measured) <= 0.2 * len(brute_measured), quick_measured


def test_quick_stops_growing_a_dimension_after_three_steps_that_did_not_pay():
    space = SearchSpace((Dimension("instances", (1, 2, 3, 4, 5, 6, 7)), Dimension("max_batch_size", (1, 4))))
    _, measured = run(quick_search, Constraints(), space=space)
    # Batching grows first (search.GROWTH_ORDER), then instances: 1 -> 2 pays, 3, 4 and 5 do
    # not (the landscape has two CPUs): 6 and 7 are never measured, while growing or as
    # neighbours of the best point.
    assert [key for key in measured if key.endswith("max_batch_size=4")] == [
        "instances=1,max_batch_size=4",
        "instances=2,max_batch_size=4",
        "instances=3,max_batch_size=4",
        "instances=4,max_batch_size=4",
        "instances=5,max_batch_size=4",
    ]
    assert not [key for key in measured if key.startswith(("instances=6", "instances=7"))]


def test_the_latency_budget_steers_both_searches_to_the_same_point_within_it():
    budget = Constraints(latency_budget_ms=4.5)
    everything, _ = run(brute_search, budget)
    within = [r for r in everything if r.steps[0].p99_ms <= 4.5]
    top = max(within, key=lambda r: r.steps[0].throughput).candidate.key
    assert top == "instances=2,max_batch_size=16,max_queue_delay_us=100,intra_op_threads=1"
    found, _ = run(quick_search, budget)
    found_within = [r for r in found if r.steps[0].p99_ms <= 4.5]
    assert max(found_within, key=lambda r: r.steps[0].throughput).candidate.key == top


def test_stored_results_are_not_measured_again():
    everything, _ = run(brute_search, Constraints())
    stored = {r.candidate.key: r for r in everything}
    found, measured = run(quick_search, Constraints(), stored)
    assert measured == []
    assert best(found) == "instances=2,max_batch_size=64,max_queue_delay_us=100,intra_op_threads=1"


def test_a_point_that_fails_to_load_scores_nothing_and_the_search_goes_on():
    async def evaluate(candidate: Candidate) -> CandidateResult:
        if candidate["max_batch_size"] == 16:
            return CandidateResult(candidate, False, "model refused batches of 16")
        rate, p99 = landscape(candidate)
        return CandidateResult(candidate, True, steps=(Step(4, rate, p99, p99, p99),))

    evaluations = Evaluations(evaluate, Constraints())
    results = asyncio.run(quick_search(SPACE, evaluations))
    failed = [r.candidate.key for r in results if not r.loaded]
    assert failed and all("max_batch_size=16" in key for key in failed)
    # Growing max_batch_size looked one step past the failure and found 64 there.
    assert best(results) == "instances=2,max_batch_size=64,max_queue_delay_us=100,intra_op_threads=1"


def test_quick_trades_instances_for_threads_where_no_single_step_pays():
    """A second thread did not pay for one instance (a noisy window, say), so growing ends at
    three one-thread instances; from there every single step oversubscribes two CPUs or gives
    one up, and only a trade (an instance for a thread) reaches the best point."""
    space = SearchSpace((Dimension("instances", (1, 2, 3)), Dimension("intra_op_threads", (1, 2))))
    rates = {(1, 1): 100.0, (1, 2): 101.0, (2, 1): 180.0, (3, 1): 200.0, (2, 2): 215.0, (3, 2): 150.0}

    async def evaluate(candidate: Candidate) -> CandidateResult:
        rate = rates[candidate["instances"], candidate["intra_op_threads"]]
        return CandidateResult(candidate, True, steps=(Step(4, rate, 1.0, 2.0, 1.0),), seconds=1.0)

    three = Candidate.from_dict({"instances": 3, "intra_op_threads": 1}, space.names)
    assert space.trades(three, "instances", "intra_op_threads") == [
        Candidate.from_dict({"instances": 2, "intra_op_threads": 2}, space.names)
    ]
    results = asyncio.run(quick_search(space, Evaluations(evaluate, Constraints())))
    assert best(results) == "instances=2,intra_op_threads=2"


def test_every_point_key_is_unique_across_the_product():
    keys = [
        Candidate(tuple(zip(SPACE.names, values))).key
        for values in itertools.product(*(d.values for d in SPACE.dimensions))
    ]
    assert len(keys) == len(set(keys))
