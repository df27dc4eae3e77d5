"""The dynamic batcher through the in-process server: batch formation, preferred sizes,
the delay bound, queue policies, priorities, ordering, shapes and cancellation.

Every assertion is about counts, orderings and overlaps; none about speed. Rules about
time (the queue delay, queue timeouts) are checked on a clock the test moves, in
test_batch_rules.py and test_queue_timeouts.py."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from clocked_batcher import clocked_batcher
from scheduling_helpers import model_of, serving, wait_until, write_model

from naiad import ErrorCode, InferenceRequest, InferenceResponse, NaiadError, Tensor
from naiad.backend import InstanceContext, ModelInstance
from naiad.observability.statistics import ModelStatistics
from naiad.scheduling.instance_runner import InstanceRunner
from naiad.scheduling.job import Job

IO4 = """input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]"""


# A model of one FP32 input, for the clocked batcher (clocked_batcher.py).
ONE_INPUT = """backend: "numpy" max_batch_size: 1
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
dynamic_batching { }"""


def add_sub_config(batching: str, max_batch_size: int = 8, extra: str = "") -> str:
    return f"""backend: "numpy" max_batch_size: {max_batch_size}
{IO4}
parameters {{key:"op" value {{string_value:"add_sub"}}}}
{batching}
{extra}"""


def sleep_config(batching: str, sleep_ms: int = 200, max_batch_size: int = 1, extra: str = "") -> str:
    return f'''backend: "numpy" max_batch_size: {max_batch_size}
input [{{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}}]
output [{{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}}]
parameters [{{key:"op" value {{string_value:"sleep"}}}}, {{key:"sleep_ms" value {{string_value:"{sleep_ms}"}}}}]
{batching}
{extra}'''


def add_sub_request(value: float, rid: str = "", rows: int = 1) -> InferenceRequest:
    a = np.full((rows, 4), value, np.float32)
    b = np.ones((rows, 4), np.float32)
    return InferenceRequest("m", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", b)], id=rid)


def one_input(rid: str, value: float = 1.0, **parameters) -> InferenceRequest:
    return InferenceRequest(
        "m", [Tensor.from_numpy("INPUT0", np.full((1, 1), value, np.float32))], id=rid, parameters=dict(parameters)
    )


async def outcome(coro):
    """The response, or the NaiadError it raised."""
    try:
        return await coro
    except NaiadError as error:
        return error


def batch_sizes(stats: dict) -> dict[int, int]:
    return {entry["batch_size"]: entry["compute_infer"]["count"] for entry in stats["batch_stats"]}


def test_concurrent_single_requests_run_in_fewer_larger_batches(tmp_path):
    write_model(tmp_path, "m", add_sub_config("dynamic_batching { max_queue_delay_microseconds: 200000 }"))

    async def go():
        async with serving(tmp_path) as server:
            responses = await asyncio.gather(*(server.infer(add_sub_request(i, str(i))) for i in range(16)))
            for i, response in enumerate(responses):
                assert response.id == str(i)
                np.testing.assert_array_equal(response.output("OUTPUT0").data, np.full((1, 4), i + 1, np.float32))
                np.testing.assert_array_equal(response.output("OUTPUT1").data, np.full((1, 4), i - 1, np.float32))
            stats = server.statistics("m")[0]
            assert stats["inference_count"] == 16
            assert stats["execution_count"] < stats["inference_count"]
            # Sixteen requests queued at once and a full batch is 8: two full batches.
            assert batch_sizes(stats) == {8: 2}
            assert stats["inference_stats"]["success"]["count"] == 16
            assert stats["inference_stats"]["queue"]["count"] == 16
            assert [e.requests for e in model_of(server, "m").executions] == [8, 8]
            # The backend stacks and splits with the core's batch helpers, whose time is
            # reported apart from the model's own compute.
            for phase in ("compute_input", "compute_infer", "compute_output"):
                assert stats["inference_stats"][phase]["count"] == 16
                assert stats["inference_stats"][phase]["ns"] > 0
                assert stats["batch_stats"][0][phase]["count"] == 2

    asyncio.run(go())


def test_a_request_is_never_split_across_batches(tmp_path):
    write_model(tmp_path, "m", add_sub_config("dynamic_batching { max_queue_delay_microseconds: 100000 }"))

    async def go():
        async with serving(tmp_path) as server:
            # 3 + 3 fit in 8, the third request of 3 does not: it waits for the next batch.
            responses = await asyncio.gather(*(server.infer(add_sub_request(i, str(i), rows=3)) for i in range(3)))
            for i, response in enumerate(responses):
                assert response.output("OUTPUT0").shape == (3, 4)
                np.testing.assert_array_equal(response.output("OUTPUT0").data, np.full((3, 4), i + 1, np.float32))
            stats = server.statistics("m")[0]
            assert batch_sizes(stats) == {6: 1, 3: 1}
            assert stats["inference_count"] == 9 and stats["execution_count"] == 2

    asyncio.run(go())


def test_preferred_batch_size_is_formed_without_waiting_for_the_delay(tmp_path):
    # The delay is far beyond the test's life: any batch sent came from the preferred rule.
    write_model(
        tmp_path,
        "m",
        add_sub_config("dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 600000000 }"),
    )

    async def go():
        async with serving(tmp_path) as server:
            await asyncio.gather(*(server.infer(add_sub_request(i)) for i in range(8)))
            stats = server.statistics("m")[0]
            assert batch_sizes(stats) == {4: 2}

    asyncio.run(go())


def test_requests_with_different_variable_dims_are_not_batched_together(tmp_path):
    config = """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1] %s}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]
dynamic_batching { max_queue_delay_microseconds: 100000 }"""
    write_model(tmp_path, "m", config % "")
    write_model(tmp_path, "ragged", (config % "allow_ragged_batch: true"))

    async def go():
        async with serving(tmp_path) as server:
            for name, expected in (("m", [2, 2]), ("ragged", [4])):
                requests = [
                    InferenceRequest(name, [Tensor.from_numpy("INPUT0", np.full((1, n), n, np.float32))])
                    for n in (3, 3, 5, 5)
                ]
                responses = await asyncio.gather(*(server.infer(r) for r in requests))
                assert [r.output("OUTPUT0").shape for r in responses] == [(1, 3), (1, 3), (1, 5), (1, 5)]
                assert [e.requests for e in model_of(server, name).executions] == expected

    asyncio.run(go())


def test_full_queue_rejects_with_unavailable_and_the_model_keeps_serving(tmp_path):
    write_model(
        tmp_path, "m", sleep_config("dynamic_batching { default_queue_policy { max_queue_size: 2 } }", sleep_ms=50)
    )

    async def go():
        async with serving(tmp_path) as server:
            # All six arrive before the batcher takes any: two fit the queue.
            results = await asyncio.gather(*(outcome(server.infer(one_input(str(i)))) for i in range(6)))
            errors = [r for r in results if isinstance(r, NaiadError)]
            assert [r.id for r in results if not isinstance(r, NaiadError)] == ["0", "1"]
            assert len(errors) == 4
            assert all(e.code is ErrorCode.UNAVAILABLE and "max_queue_size 2" in e.message for e in errors)
            stats = server.statistics("m")[0]
            assert stats["inference_stats"]["fail"]["count"] == 4
            assert server.model("m").statistics.failures_by_reason == {"REJECTED": 4}
            assert stats["inference_count"] == 2
            assert (await server.infer(one_input("after"))).id == "after"
            assert server.model("m").statistics.pending == 0

    asyncio.run(go())


def test_higher_priority_requests_run_first(tmp_path):
    batching = "dynamic_batching { priority_levels: 2 default_priority_level: 2 }"
    write_model(tmp_path, "m", sleep_config(batching, sleep_ms=1))

    async def go():
        async with serving(tmp_path) as server:
            await asyncio.gather(
                server.infer(one_input("low1")),
                server.infer(one_input("low2", priority=2)),
                server.infer(one_input("high1", priority=1)),
                server.infer(one_input("other", priority=9)),  # out of range: the default level
                server.infer(one_input("high2", priority=1)),
            )
            assert model_of(server, "m").started == ["high1", "high2", "low1", "low2", "other"]

    asyncio.run(go())


def test_each_priority_level_applies_its_own_queue_policy(tmp_path):
    batching = """dynamic_batching { priority_levels: 2 default_priority_level: 2
        priority_queue_policy { key: 2 value { max_queue_size: 1 } } }"""
    write_model(tmp_path, "m", sleep_config(batching, sleep_ms=1))

    async def go():
        async with serving(tmp_path) as server:
            results = await asyncio.gather(
                *(outcome(server.infer(one_input(f"low{i}"))) for i in range(3)),
                *(outcome(server.infer(one_input(f"high{i}", priority=1))) for i in range(3)),
            )
            ok = sorted(r.id for r in results if not isinstance(r, NaiadError))
            assert ok == ["high0", "high1", "high2", "low0"]
            errors = [r for r in results if isinstance(r, NaiadError)]
            assert len(errors) == 2 and all("priority level 2" in e.message for e in errors)

    asyncio.run(go())


def test_preserve_ordering_returns_responses_in_arrival_order(tmp_path):
    config = """backend: "numpy" max_batch_size: 1
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}, {name:"DELAY_MS" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
parameters {key:"op" value {string_value:"sleep"}}
instance_group [{count: 2 kind: KIND_CPU}]
dynamic_batching { preserve_ordering: true }"""
    write_model(tmp_path, "m", config)

    async def go():
        async with serving(tmp_path) as server:
            arrived: list[str] = []

            async def call(rid: str, delay_ms: int):
                request = one_input(rid)
                request.inputs.append(Tensor.from_numpy("DELAY_MS", np.array([[delay_ms]], np.int32)))
                response = await server.infer(request)
                arrived.append(response.id)

            await asyncio.gather(call("slow", 1000), call("fast", 0))
            executions = {e.ids[0]: e for e in model_of(server, "m").executions}
            # The two ran on different instances and "fast" finished first...
            assert executions["slow"].instance != executions["fast"].instance
            assert executions["fast"].end < executions["slow"].end
            # ...but its response waited for the earlier request's.
            assert arrived == ["slow", "fast"]

    asyncio.run(go())


def test_cancelled_request_is_dropped_from_the_queue(tmp_path):
    write_model(tmp_path, "m", sleep_config("dynamic_batching { }", sleep_ms=200))

    async def go():
        async with serving(tmp_path) as server:
            first = asyncio.ensure_future(server.infer(one_input("A")))
            await wait_until(lambda: model_of(server, "m").started, "A runs")
            doomed = asyncio.ensure_future(server.infer(one_input("B")))
            await asyncio.sleep(0)  # B is queued behind A
            doomed.cancel()
            after = await server.infer(one_input("C"))
            assert (await first).id == "A" and after.id == "C"
            assert model_of(server, "m").started == ["A", "C"]
            stats = server.statistics("m")[0]
            assert stats["inference_stats"]["fail"]["count"] == 1
            assert server.model("m").statistics.failures_by_reason == {"CANCELED": 1}
            assert server.model("m").statistics.pending == 0
            assert stats["inference_count"] == 2

    asyncio.run(go())


@pytest.mark.parametrize("batching", ["", "dynamic_batching { }"])
def test_two_instances_of_a_slow_model_execute_at_the_same_time(tmp_path, batching):
    write_model(tmp_path, "m", sleep_config(batching, sleep_ms=300, extra="instance_group [{count: 2 kind: KIND_CPU}]"))

    async def go():
        async with serving(tmp_path) as server:
            await asyncio.gather(server.infer(one_input("a")), server.infer(one_input("b")))
            first, second = model_of(server, "m").executions
            assert {first.instance, second.instance} == {"m_0_0", "m_0_1"}
            # The intervals overlap: each began before the other ended.
            assert max(first.start, second.start) < min(first.end, second.end)
            assert server.statistics("m")[0]["execution_count"] == 2

    asyncio.run(go())


def test_one_instance_never_runs_two_batches_at_once(tmp_path):
    write_model(tmp_path, "m", sleep_config("dynamic_batching { }", sleep_ms=20))

    async def go():
        async with serving(tmp_path) as server:
            await asyncio.gather(*(server.infer(one_input(str(i))) for i in range(6)))
            executions = sorted(model_of(server, "m").executions, key=lambda e: e.start)
            assert all(a.end <= b.start for a, b in zip(executions, executions[1:]))

    asyncio.run(go())


def test_model_without_batch_dimension_gets_queue_policies(tmp_path):
    config = """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[2]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[2]}]
dynamic_batching { default_queue_policy { max_queue_size: 1 } }"""
    write_model(tmp_path, "m", config)

    async def go():
        async with serving(tmp_path) as server:
            results = await asyncio.gather(
                *(
                    outcome(server.infer(InferenceRequest("m", [Tensor.from_numpy("INPUT0", np.ones(2, np.float32))])))
                    for _ in range(3)
                )
            )
            assert sum(isinstance(r, NaiadError) for r in results) == 2
            assert server.statistics("m")[0]["execution_count"] == 1

    asyncio.run(go())


def test_unloading_runs_queued_requests_without_waiting_for_the_delay(tmp_path):
    # A delay far beyond the test's life: only the unload can make the batch go.
    write_model(
        tmp_path,
        "m",
        add_sub_config("dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 600000000 }"),
    )

    async def go():
        async with serving(tmp_path) as server:
            waiting = asyncio.ensure_future(server.infer(add_sub_request(5, "queued")))
            await asyncio.sleep(0)
            await asyncio.wait_for(server.unload_model("m"), 60)
            response = await waiting
            assert response.id == "queued"
            np.testing.assert_array_equal(response.output("OUTPUT0").data, np.full((1, 4), 6, np.float32))

    asyncio.run(go())


def count_passes(scheduler) -> list[int]:
    """Each pass of the dynamic batcher's dispatcher ends waiting on its LoopEvent: count those
    waits. (A patched method of the batcher's own classes would not see the calls its
    compiled modules make.)"""
    passes: list[int] = []
    event = scheduler._changed
    wait = event.wait

    async def counted() -> bool:
        passes.append(1)
        return await wait()

    event.wait = counted
    return passes


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_a_sub_millisecond_delay_is_one_turn_of_the_loop_not_a_spin(tmp_path, loop_kind):
    """The loop's timers count milliseconds: uvloop turned a 300 us wait into a timer due at
    once, over and over, until the delay was over (the dispatcher ran dozens of times per
    request, burning a core at low load). A sub-millisecond delay is now one turn of the
    loop: requests received together still form one batch, and a lone request costs the
    dispatcher a pass or two."""
    write_model(tmp_path, "m", add_sub_config("dynamic_batching { max_queue_delay_microseconds: 300 }"))

    async def go():
        async with serving(tmp_path) as server:
            await asyncio.gather(*(server.infer(add_sub_request(i, str(i))) for i in range(6)))
            assert batch_sizes(server.statistics("m")[0]) == {6: 1}
            passes = count_passes(server.model("m").scheduler)
            for i in range(5):
                passes.clear()
                await server.infer(add_sub_request(i))
                assert len(passes) <= 3, passes

    if loop_kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(go())
    else:
        asyncio.run(go())


def test_requests_arriving_while_every_instance_is_busy_do_not_wake_the_dispatcher(tmp_path):
    """Under load most requests arrive while the instances are busy: the dispatcher can do
    nothing with them until one is free (which wakes it), so they must not cost it a pass
    each. (A request with a queue deadline still wakes it; the queue timeout tests cover
    those deadlines firing while the instance is busy.)"""
    # The ten queued behind the busy instance then run as one batch, not ten executions.
    write_model(
        tmp_path,
        "m",
        sleep_config("dynamic_batching { max_queue_delay_microseconds: 100 }", sleep_ms=300, max_batch_size=16),
    )

    async def go():
        async with serving(tmp_path) as server:
            first = asyncio.ensure_future(server.infer(one_input("busy")))
            scheduler = server.model("m").scheduler
            passes = count_passes(scheduler)
            await wait_until(lambda: not scheduler._free, "the instance is busy")
            for _ in range(20):
                await asyncio.sleep(0)  # the pass that sent "busy" has ended
            passes.clear()
            queued = [asyncio.ensure_future(server.infer(one_input(str(i)))) for i in range(10)]
            for _ in range(20):
                await asyncio.sleep(0)
            assert passes == [], "arrivals while the instance is busy woke the dispatcher"
            responses = await asyncio.gather(first, *queued)
            assert [r.id for r in responses] == ["busy", *map(str, range(10))]

    asyncio.run(go())


def test_an_execution_that_leaves_the_queue_empty_does_not_wake_the_dispatcher(tmp_path):
    """At low load each request is a batch of its own: once it is answered the dispatcher
    has nothing to do until the next arrival (which wakes it), so the end of the execution
    must not cost it a pass. Requests queued behind a busy instance still go when it frees."""
    write_model(tmp_path, "m", sleep_config("dynamic_batching { }", sleep_ms=50))

    async def go():
        async with serving(tmp_path) as server:
            passes = count_passes(server.model("m").scheduler)
            await server.infer(one_input("warm"))
            for _ in range(20):
                await asyncio.sleep(0)
            passes.clear()
            response = await server.infer(one_input("alone"))
            for _ in range(20):
                await asyncio.sleep(0)
            assert response.id == "alone"
            assert len(passes) == 1, f"one request cost the dispatcher {len(passes)} passes"
            # Behind a busy instance: the end of the first execution dispatches the rest.
            responses = await asyncio.gather(*(server.infer(one_input(str(i))) for i in range(4)))
            assert [r.id for r in responses] == ["0", "1", "2", "3"]

    asyncio.run(go())


def test_the_next_batch_starts_before_the_callers_of_the_last_one_resume(tmp_path):
    """When an execution ends with requests queued, the instance takes the next batch at
    once: the finished batch's callers resume (and their answers are written) while it runs,
    instead of the instance waiting idle until they are done."""
    write_model(tmp_path, "m", sleep_config("dynamic_batching { }", sleep_ms=50))

    async def go():
        async with serving(tmp_path) as server:
            scheduler = server.model("m").scheduler
            instance_busy_on_resuming = []

            async def call(rid: str):
                response = await server.infer(one_input(rid))
                instance_busy_on_resuming.append((rid, not scheduler._free))
                return response

            responses = await asyncio.gather(*(call(str(i)) for i in range(3)))
            assert [r.id for r in responses] == ["0", "1", "2"]
            # One request per batch: "0" and "1" each had one queued behind it.
            assert instance_busy_on_resuming == [("0", True), ("1", True), ("2", False)]

    asyncio.run(go())


class _ThreadInstance(ModelInstance):
    """A synchronous `execute`: the runner gives it a thread of its own."""

    def execute(self, requests):
        return [InferenceResponse(outputs=list(request.inputs)) for request in requests]


@pytest.mark.parametrize("threaded", [True, False], ids=["instance thread", "coroutine execute"])
def test_an_instance_thread_is_free_for_the_next_batch_before_its_answers_are_handed_over(threaded):
    """The runner tells its scheduler that an instance thread is free before it hands the
    batch's answers over, so that the next batch's task runs ahead of the callers' and the
    thread works while they write their answers. A coroutine `execute` (a model's process)
    is told free after them."""

    async def go():
        async with clocked_batcher(ONE_INPUT) as batcher:
            instance = (
                _ThreadInstance(batcher.model, InstanceContext("m_0_1", "CPU", 0, 1, "m"))
                if threaded
                else batcher.instances[0]
            )
            runner = InstanceRunner(instance, ModelStatistics("m", "1"), "m", "1", decoupled=False)
            events: list[str] = []
            request = InferenceRequest("m", [Tensor.from_numpy("INPUT0", np.ones((1, 1), np.float32))], id="x")
            job = Job(request, 1, lambda response: events.append(f"answered {response.id}"))
            await runner.run([job], on_free=lambda: events.append("free"))
            runner.close()
            expected = ["free", "answered x"] if threaded else ["answered x", "free"]
            assert events == expected

    asyncio.run(go())


def test_a_scheduler_that_fails_when_told_the_instance_is_free_costs_no_answers(caplog):
    """The runner tells its scheduler the instance is free before it hands the answers over;
    a failure there is logged, and the batch is answered all the same."""

    async def go():
        async with clocked_batcher(ONE_INPUT) as batcher:
            answers = []
            request = InferenceRequest("m", [Tensor.from_numpy("INPUT0", np.ones((1, 1), np.float32))], id="x")

            def broken_scheduler() -> None:
                raise RuntimeError("the scheduler broke")

            await batcher.runners[0].run([Job(request, 1, answers.append)], on_free=broken_scheduler)
            assert [(a.id, a.error) for a in answers] == [("x", None)]

    asyncio.run(go())
    assert "starting the next batch failed" in caplog.text and "the scheduler broke" in caplog.text
