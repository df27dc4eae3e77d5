"""The sequence batcher through the in-process server: interleaved sequences with both
strategies, control inputs, slots and implicit state. Rules about time (queue delays, the
idle release) are checked on a clock the test moves, in test_batch_rules.py."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from scheduling_helpers import model_of, serving, wait_until, write_model

from naiad import ErrorCode, InferenceRequest, NaiadError, Tensor

CONTROLS = """control_input [
  {name: "START" control [{kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1]}]},
  {name: "END" control [{kind: CONTROL_SEQUENCE_END fp32_false_true: [0, 1]}]},
  {name: "READY" control [{kind: CONTROL_SEQUENCE_READY bool_false_true: [false, true]}]},
  {name: "CORRID" control [{kind: CONTROL_SEQUENCE_CORRID data_type: %s}]}
]"""


def accumulate_config(
    strategy: str, max_batch_size: int = 4, corrid_type: str = "TYPE_UINT64", idle_us: int = 0, instances: int = 1
) -> str:
    corrid_dt = "TYPE_STRING" if corrid_type == "TYPE_STRING" else corrid_type
    idle = f"max_sequence_idle_microseconds: {idle_us}" if idle_us else ""
    return f"""backend: "numpy" max_batch_size: {max_batch_size}
input [{{name:"INPUT" data_type: TYPE_INT32 dims:[1]}}]
output [{{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}}, {{name:"CONTROLS" data_type: TYPE_INT32 dims:[3]}},
        {{name:"CORRID_OUT" data_type: {corrid_dt} dims:[1]}}]
parameters {{key:"op" value {{string_value:"accumulate"}}}}
instance_group [{{count: {instances} kind: KIND_CPU}}]
sequence_batching {{ {strategy} {idle} {CONTROLS % corrid_type} }}"""


def step(value: int, corrid, start=False, end=False, batched=True, rid="") -> InferenceRequest:
    shape = (1, 1) if batched else (1,)
    return InferenceRequest(
        "m",
        [Tensor.from_numpy("INPUT", np.full(shape, value, np.int32))],
        id=rid,
        parameters={"sequence_id": corrid, "sequence_start": start, "sequence_end": end},
    )


def total(response) -> int:
    return int(response.output("OUTPUT").data.reshape(-1)[0])


STRATEGIES = ["direct { }", "oldest { max_candidate_sequences: 4 }"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_interleaved_sequences_accumulate_separately(tmp_path, strategy):
    write_model(tmp_path, "m", accumulate_config(strategy))

    async def go():
        async with serving(tmp_path) as server:
            a, b = 1001, 1002
            plan = [
                (a, 1, True, False),
                (b, 10, True, False),
                (a, 2, False, False),
                (b, 20, False, False),
                (a, 3, False, True),
                (b, 30, False, True),
            ]
            seen = {a: [], b: []}
            for corrid, value, start, end in plan:
                response = await server.infer(step(value, corrid, start, end))
                seen[corrid].append(total(response))
                controls = response.output("CONTROLS").data.reshape(-1).tolist()
                assert controls == [int(start), int(end), 1]
                assert int(response.output("CORRID_OUT").data.reshape(-1)[0]) == corrid
            assert seen == {a: [1, 3, 6], b: [10, 30, 60]}
            assert model_of(server, "m").control_datatypes == {
                "START": "INT32",
                "END": "FP32",
                "READY": "BOOL",
                "CORRID": "UINT64",
            }

    asyncio.run(go())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_concurrent_sequences_on_two_instances(tmp_path, strategy):
    write_model(tmp_path, "m", accumulate_config(strategy, instances=2))

    async def go():
        async with serving(tmp_path) as server:

            async def sequence(corrid: int, values: list[int]) -> list[int]:
                totals = []
                for i, value in enumerate(values):
                    response = await server.infer(step(value, corrid, i == 0, i == len(values) - 1))
                    totals.append(total(response))
                return totals

            results = await asyncio.gather(*(sequence(100 + s, [s] * 5) for s in range(1, 7)))
            assert results == [[s * k for k in range(1, 6)] for s in range(1, 7)]
            stats = server.statistics("m")[0]
            assert stats["inference_count"] == 30
            # Several sequences shared batches, and both instances served sequences.
            assert stats["execution_count"] < 30
            assert {e.instance for e in model_of(server, "m").executions} == {"m_0_0", "m_0_1"}

    asyncio.run(go())


def test_direct_strategy_pads_empty_slots_with_not_ready_requests(tmp_path):
    write_model(tmp_path, "m", accumulate_config("direct { }"))

    async def go():
        async with serving(tmp_path) as server:
            await server.infer(step(1, 7, start=True))  # slot 0
            await server.infer(step(5, 8, start=True))  # slot 1
            # Only slot 1 has work: the batch is [padding, request], and the padding
            # request does not disturb sequence 7's sum.
            response = await server.infer(step(5, 8, end=True))
            assert total(response) == 10
            last = model_of(server, "m").executions[-1]
            assert last.requests == 2
            assert total(await server.infer(step(1, 7, end=True))) == 2
            # Padding is not counted as inference, nor as a pending request.
            assert server.statistics("m")[0]["inference_count"] == 4
            assert server.model("m").statistics.pending == 0

    asyncio.run(go())


def test_string_correlation_ids(tmp_path):
    write_model(tmp_path, "m", accumulate_config("direct { }", corrid_type="TYPE_STRING"))

    async def go():
        async with serving(tmp_path) as server:
            await server.infer(step(2, "alpha", start=True))
            response = await server.infer(step(3, "alpha", end=True))
            assert total(response) == 5
            assert response.output("CORRID_OUT").data.reshape(-1)[0] == b"alpha"
            with pytest.raises(NaiadError) as info:
                await server.infer(step(3, 12, start=True))
            assert info.value.code is ErrorCode.INVALID_ARG and "string correlation IDs" in info.value.message

    asyncio.run(go())


def test_requests_outside_a_sequence_get_clear_errors(tmp_path):
    write_model(tmp_path, "m", accumulate_config("direct { }"))

    async def go():
        async with serving(tmp_path) as server:
            with pytest.raises(NaiadError) as info:
                await server.infer(step(1, 55))
            assert info.value.code is ErrorCode.INVALID_ARG
            assert "sequence 55" in info.value.message and "START" in info.value.message
            with pytest.raises(NaiadError) as info:
                await server.infer(step(1, 0, start=True))
            assert info.value.code is ErrorCode.INVALID_ARG and "correlation ID" in info.value.message
            await server.infer(step(1, 56, start=True, end=True))
            with pytest.raises(NaiadError) as info:
                await server.infer(step(1, 56))  # the sequence ended
            assert info.value.code is ErrorCode.INVALID_ARG
            request = step(1, 57, start=True)
            request.inputs[0] = Tensor.from_numpy("INPUT", np.ones((2, 1), np.int32))
            with pytest.raises(NaiadError) as info:
                await server.infer(request)
            assert "must specify batch-size 1 due to requirements of sequence batcher" in info.value.message
            with pytest.raises(NaiadError) as info:
                await server.infer(step(1, 2**64, start=True))
            assert info.value.code is ErrorCode.INVALID_ARG and "does not fit" in info.value.message
            # The server keeps serving sequences.
            assert total(await server.infer(step(4, 58, start=True, end=True))) == 4

    asyncio.run(go())


@pytest.mark.parametrize("value", [[1], {"id": 1}, 1.5, True, None])
def test_a_sequence_id_that_is_no_integer_or_string_is_refused(value):
    """The sequence batcher keys its sequences by the id: a JSON list or object there failed
    as unhashable (a 500 for a model without a CORRID control), a float or a bool passed as
    another id."""
    request = InferenceRequest("m", [], parameters={"sequence_id": value})
    with pytest.raises(NaiadError) as info:
        request.take_control_parameters()
    assert info.value.code is ErrorCode.INVALID_ARG
    assert info.value.message.startswith("request parameter 'sequence_id' must be an integer or a string, got ")


def test_a_numpy_integer_sequence_id_is_an_integer():
    request = InferenceRequest("m", [], parameters={"sequence_id": np.uint64(7)})
    request.take_control_parameters()
    assert request.correlation_id == 7 and type(request.correlation_id) is int


def test_end_releases_the_slot_for_a_waiting_sequence(tmp_path):
    # One slot, and sequences that never idle out: only END can free the slot.
    write_model(tmp_path, "m", accumulate_config("direct { }", max_batch_size=0, idle_us=600_000_000))

    async def go():
        async with serving(tmp_path) as server:
            await server.infer(step(1, 1, start=True, batched=False))
            waiting = asyncio.ensure_future(server.infer(step(7, 2, start=True, end=True, batched=False)))
            await asyncio.sleep(0.05)
            assert not waiting.done()  # sequence 2 waits for the only slot
            assert total(await server.infer(step(1, 1, end=True, batched=False))) == 2
            assert total(await waiting) == 7

    asyncio.run(go())


def state_config(strategy: str, initial: str) -> str:
    return f"""backend: "numpy" max_batch_size: 2
input [{{name:"INPUT" data_type: TYPE_INT32 dims:[1]}}]
output [{{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}}]
parameters {{key:"op" value {{string_value:"state_add"}}}}
sequence_batching {{ {strategy}
  state [{{input_name: "INPUT_STATE" output_name: "OUTPUT_STATE" data_type: TYPE_INT32 dims: [1] {initial}}}]
}}"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_implicit_state_carries_between_requests(tmp_path, strategy):
    write_model(
        tmp_path,
        "m",
        state_config(strategy, 'initial_state {data_type: TYPE_INT32 dims: [1] zero_data: true name: "z"}'),
    )

    async def go():
        async with serving(tmp_path) as server:
            totals = {11: [], 12: []}
            for corrid, value, start, end in [
                (11, 1, True, False),
                (12, 100, True, False),
                (11, 2, False, False),
                (12, 200, False, True),
                (11, 3, False, True),
            ]:
                response = await server.infer(step(value, corrid, start, end))
                assert [t.name for t in response.outputs] == ["OUTPUT"]  # state stays inside
                totals[corrid].append(total(response))
            assert totals == {11: [1, 3, 6], 12: [100, 300]}
            # A new sequence on a reused id starts from the initial state again.
            assert total(await server.infer(step(5, 11, start=True, end=True))) == 5

    asyncio.run(go())


def test_initial_state_from_a_data_file(tmp_path):
    version = write_model(
        tmp_path,
        "m",
        state_config("direct { }", 'initial_state {data_type: TYPE_INT32 dims: [1] data_file: "hundred" name: "h"}'),
    )
    # Where Triton looks: an initial_state directory in the model's directory.
    (version.parent / "initial_state").mkdir()
    (version.parent / "initial_state" / "hundred").write_bytes(np.array([100], np.int32).tobytes())

    async def go():
        async with serving(tmp_path) as server:
            assert total(await server.infer(step(1, 3, start=True))) == 101
            assert total(await server.infer(step(1, 3, end=True))) == 102

    asyncio.run(go())


def test_bad_control_config_fails_the_load_with_a_clear_message(tmp_path):
    bad = accumulate_config("direct { }").replace("int32_false_true: [0, 1]", "int32_false_true: [1]")
    write_model(tmp_path, "m", bad)

    async def go():
        from numpy_backend import NumpyPlugin

        from naiad import Server, ServerOptions

        server = Server(
            ServerOptions([str(tmp_path)], backend_plugins=[NumpyPlugin()], load_backend_entry_points=False)
        )
        await server.start()
        try:
            assert len(server.startup_failures) == 1
            message = server.startup_failures[0]
            assert "model 'm'" in message and "START" in message and "must have exactly 2 entries" in message
        finally:
            await server.stop()

    asyncio.run(go())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_pipelined_requests_of_one_sequence_run_one_at_a_time_in_order(tmp_path, strategy):
    write_model(tmp_path, "m", accumulate_config(strategy))

    async def go():
        async with serving(tmp_path) as server:
            # Sent without waiting for answers: the batcher must still run them in order,
            # never two of one sequence in the same batch.
            responses = await asyncio.gather(
                server.infer(step(1, 9, start=True)),
                server.infer(step(2, 9)),
                server.infer(step(3, 9, end=True)),
            )
            assert [total(r) for r in responses] == [1, 3, 6]
            assert [e.requests for e in model_of(server, "m").executions] == [1, 1, 1]

    asyncio.run(go())


def test_cancelling_a_queued_request_cancels_its_whole_sequence(tmp_path):
    config = accumulate_config("direct { }").replace(
        'parameters {key:"op" value {string_value:"accumulate"}}',
        'parameters [{key:"op" value {string_value:"accumulate"}}, {key:"sleep_ms" value {string_value:"300"}}]',
    )
    write_model(tmp_path, "m", config)

    async def go():
        async with serving(tmp_path) as server:
            first = asyncio.ensure_future(server.infer(step(1, 5, start=True, rid="first")))
            await wait_until(lambda: model_of(server, "m").started, "the first request runs")
            doomed = asyncio.ensure_future(server.infer(step(100, 5, rid="doomed")))
            behind = asyncio.ensure_future(server.infer(step(1000, 5, rid="behind")))
            await asyncio.sleep(0)  # both queued behind the running request of their sequence
            doomed.cancel()
            # The request behind the cancelled one is cancelled with it, as in Triton.
            with pytest.raises(NaiadError) as info:
                await behind
            assert info.value.code is ErrorCode.CANCELLED
            assert total(await first) == 1
            # The sequence has ended: its id needs a new START.
            with pytest.raises(NaiadError, match="START"):
                await server.infer(step(2, 5, end=True, rid="late"))
            assert total(await server.infer(step(7, 5, start=True, end=True, rid="again"))) == 7
            assert model_of(server, "m").started == ["first", "again"]

    asyncio.run(go())


def test_unloading_runs_pending_sequence_requests_and_refuses_waiting_sequences(tmp_path):
    config = accumulate_config(
        "direct { max_queue_delay_microseconds: 600000000 minimum_slot_utilization: 1.0 }",
        max_batch_size=0,
        idle_us=600_000_000,
    )
    write_model(tmp_path, "m", config)

    async def go():
        async with serving(tmp_path) as server:
            await server.infer(step(1, 1, start=True, batched=False))
            # Sequence 2 waits for the only slot, which sequence 1 keeps.
            backlog = asyncio.ensure_future(server.infer(step(5, 2, start=True, batched=False)))
            await asyncio.sleep(0)
            await asyncio.wait_for(server.unload_model("m"), 60)
            with pytest.raises(NaiadError) as info:
                await backlog
            assert info.value.code is ErrorCode.UNAVAILABLE and "unloaded" in info.value.message

    asyncio.run(go())


def test_state_without_initial_state_starts_with_one_element_per_variable_dim(tmp_path):
    write_model(tmp_path, "m", state_config("direct { }", "").replace("dims: [1] }", "dims: [-1] }"))

    async def go():
        async with serving(tmp_path) as server:
            assert total(await server.infer(step(4, 21, start=True))) == 4
            assert total(await server.infer(step(5, 21, end=True))) == 9

    asyncio.run(go())
