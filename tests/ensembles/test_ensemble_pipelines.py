"""Ensembles run through the in-process server with the numpy test backend: data flows
through the steps, independent steps overlap, each step model keeps its own statistics."""

from __future__ import annotations

import numpy as np
import pytest
from ensemble_repo import add_sub, ensemble, serve, step, tensor, unary

from naiad import ErrorCode, InferenceRequest, NaiadError, RequestedOutput, Tensor

A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.full((2, 4), 0.5, np.float32)


def request(model: str, outputs: tuple[str, ...] = (), **tensors: np.ndarray) -> InferenceRequest:
    return InferenceRequest(
        model,
        [Tensor.from_numpy(name, value) for name, value in tensors.items()],
        outputs=[RequestedOutput(name) for name in outputs],
    )


def chain(repo):
    """A -> add_sub -> SUM -> double -> SUM2; DIFF straight out."""
    add_sub(repo)
    unary(repo, "double", "scale", factor="2")
    ensemble(
        repo,
        "chain",
        [tensor("A"), tensor("B")],
        [tensor("SUM2"), tensor("DIFF")],
        [
            step("add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "SUM", "OUTPUT1": "DIFF"}),
            step("double", {"INPUT0": "SUM"}, {"OUTPUT0": "SUM2"}),
        ],
    )


def test_two_step_chain_computes_and_counts_per_step(tmp_path):
    chain(tmp_path)

    async def body(server):
        response = await server.infer(request("chain", A=A, B=B))
        assert (response.model_name, response.model_version) == ("chain", "1")
        assert [t.name for t in response.outputs] == ["SUM2", "DIFF"]
        np.testing.assert_array_equal(response.output("SUM2").data, (A + B) * 2)
        np.testing.assert_array_equal(response.output("DIFF").data, A - B)
        await server.infer(request("chain", A=A[:1], B=B[:1]))
        stats = {s["name"]: s for s in server.statistics()}
        # The ensemble counts its own requests; each step model counts its executions.
        assert stats["chain"]["inference_stats"]["success"]["count"] == 2
        assert stats["chain"]["inference_count"] == 3 and stats["chain"]["execution_count"] == 2
        for name in ("add_sub", "double"):
            assert stats[name]["inference_stats"]["success"]["count"] == 2
            assert stats[name]["inference_count"] == 3
        assert server.model_ready("chain") and server.is_ready()
        metadata = server.model_metadata("chain")
        assert metadata["platform"] == "ensemble"
        assert [i["name"] for i in metadata["inputs"]] == ["A", "B"]
        assert metadata["outputs"][0] == {"name": "SUM2", "datatype": "FP32", "shape": [-1, 4]}
        assert server.model_config("chain").decoupled is False

    serve(tmp_path, body)


def test_independent_steps_run_at_the_same_time(tmp_path):
    # Both branches wait for each other at a barrier: run one after the other, they
    # would fail (BrokenBarrierError), so a correct answer proves they overlapped.
    unary(tmp_path, "left", "rendezvous", barrier="overlap", parties="2")
    unary(tmp_path, "right", "rendezvous", barrier="overlap", parties="2")
    add_sub(tmp_path)
    ensemble(
        tmp_path,
        "diamond",
        [tensor("X")],
        [tensor("SUM")],
        [
            step("left", {"INPUT0": "X"}, {"OUTPUT0": "L"}),
            step("right", {"INPUT0": "X"}, {"OUTPUT0": "R"}),
            step("add_sub", {"INPUT0": "L", "INPUT1": "R"}, {"OUTPUT0": "SUM"}),
        ],
    )

    async def body(server):
        response = await server.infer(request("diamond", X=A))
        np.testing.assert_array_equal(response.output("SUM").data, A + A)

    serve(tmp_path, body)


def test_requested_intermediate_output_prunes_later_steps(tmp_path):
    add_sub(tmp_path)
    unary(tmp_path, "double", "scale", factor="2")
    ensemble(
        tmp_path,
        "tapped",
        [tensor("A"), tensor("B")],
        [tensor("SUM"), tensor("SUM2"), tensor("DIFF")],
        [
            step("add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "SUM", "OUTPUT1": "DIFF"}),
            step("double", {"INPUT0": "SUM"}, {"OUTPUT0": "SUM2"}),
        ],
    )

    async def body(server):
        # SUM is an intermediate tensor (it feeds 'double') that is also an output.
        response = await server.infer(request("tapped", ("SUM",), A=A, B=B))
        assert [t.name for t in response.outputs] == ["SUM"]
        np.testing.assert_array_equal(response.output("SUM").data, A + B)
        # Only what leads to the requested output ran, as Triton prunes ensembles.
        assert server.statistics("double")[0]["execution_count"] == 0
        response = await server.infer(request("tapped", ("SUM2", "SUM"), A=A, B=B))
        assert [t.name for t in response.outputs] == ["SUM2", "SUM"]
        np.testing.assert_array_equal(response.output("SUM2").data, (A + B) * 2)
        assert server.statistics("double")[0]["execution_count"] == 1

    serve(tmp_path, body)


def test_ensemble_of_ensembles(tmp_path):
    chain(tmp_path)
    unary(tmp_path, "triple", "scale", factor="3")
    ensemble(
        tmp_path,
        "outer",
        [tensor("P"), tensor("Q")],
        [tensor("OUT"), tensor("D")],
        [
            step("chain", {"A": "P", "B": "Q"}, {"SUM2": "S", "DIFF": "D"}),
            step("triple", {"INPUT0": "S"}, {"OUTPUT0": "OUT"}),
        ],
    )

    async def body(server):
        assert server.startup_failures == []
        response = await server.infer(request("outer", P=A, Q=B))
        np.testing.assert_array_equal(response.output("OUT").data, (A + B) * 6)
        np.testing.assert_array_equal(response.output("D").data, A - B)
        assert server.statistics("chain")[0]["inference_stats"]["success"]["count"] == 1
        assert server.statistics("add_sub")[0]["inference_stats"]["success"]["count"] == 1

    serve(tmp_path, body)


def test_decoupled_step_streams_through_downstream_steps(tmp_path):
    unary(tmp_path, "pre", "identity")
    unary(tmp_path, "repeat", "count_up", count="3", extra="model_transaction_policy { decoupled: true }\n")
    unary(tmp_path, "double", "scale", factor="2")
    ensemble(
        tmp_path,
        "stream",
        [tensor("X")],
        [tensor("Y")],
        [
            step("pre", {"INPUT0": "X"}, {"OUTPUT0": "P"}),
            step("repeat", {"INPUT0": "P"}, {"OUTPUT0": "R"}),
            step("double", {"INPUT0": "R"}, {"OUTPUT0": "Y"}),
        ],
    )

    async def body(server):
        assert server.model_config("stream").decoupled is True
        responses = [r async for r in server.infer_stream(request("stream", X=A))]
        assert all(r.error is None for r in responses)
        assert responses[-1].final and not any(r.final for r in responses[:-1])
        answers = sorted((r.output("Y").data for r in responses if r.outputs), key=lambda y: y[0, 0])
        assert len(answers) == 3 and all(r.model_name == "stream" for r in responses)
        for i, y in enumerate(answers):
            np.testing.assert_array_equal(y, (A + i) * 2)
        # Each response of the decoupled step ran the step after it once.
        assert server.statistics("double")[0]["inference_stats"]["success"]["count"] == 3
        assert server.statistics("pre")[0]["inference_stats"]["success"]["count"] == 1
        # A stream of three cannot be one answer.
        with pytest.raises(NaiadError) as info:
            await server.infer(request("stream", X=A))
        assert info.value.code is ErrorCode.UNSUPPORTED and "3 responses" in info.value.message

    serve(tmp_path, body)


def test_batching_ensemble_with_non_batching_step(tmp_path):
    # The full shapes agree: [-1, 4] for the ensemble, [-1, 4] for the non-batching step.
    unary(tmp_path, "flat", "scale", dims="[-1, 4]", max_batch_size=0, factor="10")
    ensemble(
        tmp_path,
        "mixed",
        [tensor("X")],
        [tensor("Y")],
        [step("flat", {"INPUT0": "X"}, {"OUTPUT0": "Y"})],
    )

    async def body(server):
        response = await server.infer(request("mixed", X=A))
        np.testing.assert_array_equal(response.output("Y").data, A * 10)

    serve(tmp_path, body)


def test_failing_step_names_ensemble_and_step_and_server_keeps_serving(tmp_path):
    add_sub(tmp_path)
    unary(tmp_path, "boom", "fail")
    ensemble(
        tmp_path,
        "fragile",
        [tensor("A"), tensor("B")],
        [tensor("Y")],
        [
            step("add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "SUM"}),
            step("boom", {"INPUT0": "SUM"}, {"OUTPUT0": "Y"}),
        ],
    )

    async def body(server):
        with pytest.raises(NaiadError) as info:
            await server.infer(request("fragile", A=A, B=B))
        message = info.value.message
        assert message.startswith("in ensemble 'fragile', ") and message.endswith(" [step 1 (model 'boom')]")
        assert "failed on purpose" in message
        stats = server.statistics("fragile")[0]["inference_stats"]
        assert stats["fail"]["count"] == 1 and stats["success"]["count"] == 0
        response = await server.infer(request("add_sub", INPUT0=A, INPUT1=B))
        np.testing.assert_array_equal(response.output("OUTPUT0").data, A + B)
        # Bad input to the ensemble is refused before any step runs.
        with pytest.raises(NaiadError) as info:
            await server.infer(request("fragile", A=A))
        assert info.value.code is ErrorCode.INVALID_ARG and "'B'" in info.value.message
        assert server.statistics("add_sub")[0]["inference_stats"]["success"]["count"] == 2

    serve(tmp_path, body)


def test_unloading_a_step_model_makes_the_ensemble_unavailable(tmp_path):
    chain(tmp_path)

    async def body(server):
        # Explicit mode: loading the ensemble loads its step models, as Triton does.
        await server.load_model("chain")
        assert {r["name"]: r.get("state") for r in server.repository_index()} == {
            "add_sub": "READY",
            "chain": "READY",
            "double": "READY",
        }
        await server.unload_model("double")
        assert not server.model_ready("chain")
        with pytest.raises(NaiadError) as info:
            await server.infer(request("chain", A=A, B=B))
        assert info.value.code is ErrorCode.UNAVAILABLE
        assert "in ensemble 'chain', step 1 (model 'double') is not available" in info.value.message
        row = next(r for r in server.repository_index() if r["name"] == "chain")
        assert row["state"] == "UNAVAILABLE" and "'double'" in row["reason"]
        assert server.statistics("add_sub")[0]["execution_count"] == 0  # nothing half-ran
        await server.load_model("double")
        assert server.model_ready("chain")
        response = await server.infer(request("chain", A=A, B=B))
        np.testing.assert_array_equal(response.output("SUM2").data, (A + B) * 2)

    serve(tmp_path, body, model_control_mode="explicit")


def test_step_version_pinning(tmp_path):
    add_sub(tmp_path)
    unary(tmp_path, "double", "scale", factor="2")
    (tmp_path / "double" / "2").mkdir()
    config = tmp_path / "double" / "config.pbtxt"
    config.write_text(config.read_text() + "version_policy { all { } }\n")
    ensemble(
        tmp_path,
        "pinned",
        [tensor("X")],
        [tensor("Y")],
        [step("double", {"INPUT0": "X"}, {"OUTPUT0": "Y"}, version=1)],
    )
    ensemble(
        tmp_path,
        "missing_version",
        [tensor("X")],
        [tensor("Y")],
        [step("double", {"INPUT0": "X"}, {"OUTPUT0": "Y"}, version=7)],
    )

    async def body(server):
        response = await server.infer(request("pinned", X=A))
        np.testing.assert_array_equal(response.output("Y").data, A * 2)
        assert server.statistics("double", "1")[0]["execution_count"] == 1
        assert server.statistics("double", "2")[0]["execution_count"] == 0
        assert any(
            "step 0 (model 'double')" in f and "'double' version 7 is not found" in f for f in server.startup_failures
        )

    serve(tmp_path, body)


def test_ensembles_load_after_their_steps_in_none_mode(tmp_path):
    # 'aaa' sorts before the models it uses; start-up still loads them first.
    add_sub(tmp_path, "zz_add_sub")
    ensemble(
        tmp_path,
        "aaa",
        [tensor("A"), tensor("B")],
        [tensor("S")],
        [step("zz_add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "S"})],
    )

    async def body(server):
        assert server.startup_failures == []
        response = await server.infer(request("aaa", A=A, B=B))
        np.testing.assert_array_equal(response.output("S").data, A + B)

    serve(tmp_path, body)


def test_unload_dependents_unloads_steps_no_other_ensemble_uses(tmp_path):
    chain(tmp_path)
    ensemble(
        tmp_path,
        "other",
        [tensor("A"), tensor("B")],
        [tensor("S")],
        [step("add_sub", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "S"})],
    )

    async def body(server):
        await server.load_model("chain")
        await server.load_model("other")
        await server.unload_model("chain", unload_dependents=True)
        states = {r["name"]: r.get("state") for r in server.repository_index()}
        # 'double' served only 'chain'; 'add_sub' still serves 'other' (as Triton decides).
        assert states == {"add_sub": "READY", "chain": "UNAVAILABLE", "double": "UNAVAILABLE", "other": "READY"}
        response = await server.infer(request("other", A=A, B=B))
        np.testing.assert_array_equal(response.output("S").data, A + B)
        # Without the parameter only the named model goes.
        await server.unload_model("other")
        assert server.model_ready("add_sub")

    serve(tmp_path, body, model_control_mode="explicit")


def held_two_step_ensemble(repo, barrier: str) -> None:
    """Ensemble 'two': step 0 ('first') waits at `barrier` for one more party, then 'second'."""
    unary(repo, "first", "rendezvous", barrier=barrier, parties="2")
    unary(repo, "second", "identity")
    ensemble(
        repo,
        "two",
        [tensor("X")],
        [tensor("Y")],
        [step("first", {"INPUT0": "X"}, {"OUTPUT0": "T"}), step("second", {"INPUT0": "T"}, {"OUTPUT0": "Y"})],
    )


async def held_request(server, barrier: str):
    """A request to 'two' started, once step 0 waits at `barrier`: the request, the task
    awaiting its answer, and the barrier (waiting at it lets step 0 go on)."""
    import asyncio

    from numpy_backend import _barrier

    req = request("two", X=A)
    call = asyncio.create_task(server.infer(req))
    gate = _barrier(barrier, 2)
    while gate.n_waiting < 1:
        await asyncio.sleep(0.01)
    return req, call, gate


def test_cancelling_the_ensemble_request_stops_later_steps(tmp_path):
    import asyncio

    held_two_step_ensemble(tmp_path, "cancel-test")

    async def body(server):
        # Step 0 is executing once it waits at its barrier; cancel, then let it finish.
        req, call, gate = await held_request(server, "cancel-test")
        req.cancelled = True
        await asyncio.to_thread(gate.wait, 30)
        with pytest.raises(NaiadError) as info:
            await call
        assert info.value.code is ErrorCode.CANCELLED
        assert info.value.message.startswith("in ensemble 'two', ")
        assert info.value.message.endswith(" [step 0 (model 'first')]")
        assert server.statistics("second")[0]["execution_count"] == 0
        assert server.statistics("two")[0]["inference_stats"]["fail"]["count"] == 1

    serve(tmp_path, body)


def test_unloading_the_ensemble_with_a_request_in_flight_answers_it_unavailable(tmp_path):
    import asyncio

    held_two_step_ensemble(tmp_path, "unload-test")

    async def body(server):
        _, call, gate = await held_request(server, "unload-test")
        # The ensemble goes first and waits 0.2 s for its request; step 0 is still held.
        unloading = asyncio.create_task(server.models.unload_all(0.2))
        with pytest.raises(NaiadError) as info:
            await call
        assert info.value.code is ErrorCode.UNAVAILABLE
        assert info.value.message == "in ensemble 'two', the ensemble was unloaded before the request finished"
        await asyncio.to_thread(gate.wait, 30)
        await unloading
        assert not server.model_ready("two")

    serve(tmp_path, body)


def test_max_inflight_requests_and_bytes_tensors(tmp_path):
    import asyncio

    unary(tmp_path, "text", "identity", data_type="TYPE_STRING", dims="[2]")
    ensemble(
        tmp_path,
        "texts",
        [tensor("S", "TYPE_STRING", "[2]")],
        [tensor("T", "TYPE_STRING", "[2]")],
        [step("text", {"INPUT0": "S"}, {"OUTPUT0": "T"})],
        extra="",
    )
    config = tmp_path / "texts" / "config.pbtxt"
    config.write_text(
        config.read_text().replace("ensemble_scheduling {", "ensemble_scheduling { max_inflight_requests: 1")
    )

    async def body(server):
        words = [np.array([[f"a{i}".encode(), b"\x00\xff"]], dtype=object) for i in range(4)]
        responses = await asyncio.gather(
            *(server.infer(InferenceRequest("texts", [Tensor.from_numpy("S", w, "BYTES")])) for w in words)
        )
        for word, response in zip(words, responses):
            assert response.output("T").datatype == "BYTES"
            assert response.output("T").data.tolist() == word.tolist()
        assert server.model_config("texts").proto.ensemble_scheduling.max_inflight_requests == 1

    serve(tmp_path, body)


def test_decoupled_ensemble_inside_an_ensemble_streams(tmp_path):
    unary(tmp_path, "repeat", "count_up", count="2", extra="model_transaction_policy { decoupled: true }\n")
    unary(tmp_path, "double", "scale", factor="2")
    ensemble(tmp_path, "inner", [tensor("X")], [tensor("R")], [step("repeat", {"INPUT0": "X"}, {"OUTPUT0": "R"})])
    ensemble(
        tmp_path,
        "outer",
        [tensor("X")],
        [tensor("Y")],
        [step("inner", {"X": "X"}, {"R": "R"}), step("double", {"INPUT0": "R"}, {"OUTPUT0": "Y"})],
    )

    async def body(server):
        assert server.model_config("inner").decoupled and server.model_config("outer").decoupled
        responses = [r async for r in server.infer_stream(request("outer", X=A))]
        answers = sorted((r.output("Y").data for r in responses if r.outputs), key=lambda y: y[0, 0])
        assert len(answers) == 2 and responses[-1].final
        for i, y in enumerate(answers):
            np.testing.assert_array_equal(y, (A + i) * 2)

    serve(tmp_path, body)


def has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_step_instances_serve_concurrent_ensemble_requests(tmp_path):
    # Two instances of the step model meet at a barrier: two ensemble requests can only
    # both finish when each runs on its own instance at the same time.
    unary(
        tmp_path,
        "wide",
        "rendezvous",
        barrier="instances",
        parties="2",
        extra="instance_group [ { count: 2 kind: KIND_CPU } ]\n",
    )
    ensemble(tmp_path, "fan", [tensor("X")], [tensor("Y")], [step("wide", {"INPUT0": "X"}, {"OUTPUT0": "Y"})])

    async def body(server):
        import asyncio

        responses = await asyncio.gather(*(server.infer(request("fan", X=A + i)) for i in range(2)))
        for i, response in enumerate(responses):
            np.testing.assert_array_equal(response.output("Y").data, A + i)
        assert server.statistics("wide")[0]["execution_count"] == 2

    serve(tmp_path, body)


@pytest.mark.skipif(not has_module("naiad.scheduling.dynamic_batcher"), reason="the dynamic batcher is not installed")
def test_step_dynamic_batching_merges_concurrent_ensemble_requests(tmp_path):
    # A long queue delay with a preferred size of 4: the batch runs when the fourth step
    # request arrives, so four concurrent ensemble requests make one execution.
    unary(
        tmp_path,
        "batched",
        "identity",
        extra="dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 60000000 }\n",
    )
    ensemble(tmp_path, "many", [tensor("X")], [tensor("Y")], [step("batched", {"INPUT0": "X"}, {"OUTPUT0": "Y"})])

    async def body(server):
        import asyncio

        responses = await asyncio.gather(*(server.infer(request("many", X=A[:1] + i)) for i in range(4)))
        for i, response in enumerate(responses):
            np.testing.assert_array_equal(response.output("Y").data, A[:1] + i)
        stats = server.statistics("batched")[0]
        assert stats["execution_count"] == 1 and stats["inference_count"] == 4
        assert server.statistics("many")[0]["execution_count"] == 4

    serve(tmp_path, body)


def test_optional_ensemble_input_left_out_reaches_the_step_as_absent(tmp_path):
    # The step's INPUT1 is optional; the numpy identity op echoes whatever inputs arrive.
    from ensemble_repo import numpy_model

    numpy_model(
        tmp_path,
        "echo",
        "identity",
        [tensor("INPUT0"), '{ name: "INPUT1" data_type: TYPE_FP32 dims: [4] optional: true }'],
        [tensor("OUTPUT0"), tensor("OUTPUT1")],
    )
    ensemble(
        tmp_path,
        "maybe",
        [tensor("X"), '{ name: "Z" data_type: TYPE_FP32 dims: [4] optional: true }'],
        [tensor("Y")],
        [step("echo", {"INPUT0": "X", "INPUT1": "Z"}, {"OUTPUT0": "Y"})],
    )

    async def body(server):
        response = await server.infer(request("maybe", X=A))
        np.testing.assert_array_equal(response.output("Y").data, A)
        response = await server.infer(request("maybe", X=A, Z=B))
        np.testing.assert_array_equal(response.output("Y").data, A)

    serve(tmp_path, body)


def test_step_model_reloaded_with_an_incompatible_config_is_caught(tmp_path):
    chain(tmp_path)

    async def body(server):
        await server.load_model("chain")
        # 'double' comes back with 8-element vectors: the ensemble no longer fits it.
        config = server.model_config("double").to_json_dict()
        for spec in config["input"] + config["output"]:
            spec["dims"] = ["8"]
        await server.load_model("double", config)
        assert not server.model_ready("chain")
        with pytest.raises(NaiadError) as info:
            await server.infer(request("chain", A=A, B=B))
        assert info.value.code is ErrorCode.UNAVAILABLE
        assert "step model changed since the ensemble was loaded" in info.value.message
        assert "ensemble 'chain', step 1 (model 'double'), tensor 'SUM': in ensemble chain, ensemble tensor SUM: " in (
            info.value.message
        )
        assert "inconsistent shape" in info.value.message
        assert server.statistics("add_sub")[0]["execution_count"] == 0

    serve(tmp_path, body, model_control_mode="explicit")
