"""Scheduling seen by tritonclient over real sockets: `naiad serve` with the numpy test
backend, sequences and queue policies over HTTP and gRPC, batching in the statistics."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as grpcaio
import tritonclient.http as httpclient
import tritonclient.http.aio as httpaio
from numpy_backend import SEQUENCE_CONTROLS
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent

MODELS = {
    "accumulate": """backend: "numpy" max_batch_size: 4
input [{name:"INPUT" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}, {name:"CONTROLS" data_type: TYPE_INT32 dims:[3]},
        {name:"CORRID_OUT" data_type: TYPE_UINT64 dims:[1]}]
parameters {key:"op" value {string_value:"accumulate"}}
sequence_batching { direct { } %s }"""
    % (SEQUENCE_CONTROLS % "TYPE_UINT64"),
    "accumulate_str": """backend: "numpy" max_batch_size: 4
input [{name:"INPUT" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}, {name:"CONTROLS" data_type: TYPE_INT32 dims:[3]},
        {name:"CORRID_OUT" data_type: TYPE_STRING dims:[1]}]
parameters {key:"op" value {string_value:"accumulate"}}
sequence_batching { oldest { max_candidate_sequences: 4 } %s }"""
    % (SEQUENCE_CONTROLS % "TYPE_STRING"),
    "slow_queue": """backend: "numpy" max_batch_size: 1
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
parameters [{key:"op" value {string_value:"sleep"}}, {key:"sleep_ms" value {string_value:"300"}}]
dynamic_batching { default_queue_policy { max_queue_size: 1 default_timeout_microseconds: 600000000
                                          allow_timeout_override: true } }""",
    "slow": """backend: "numpy" max_batch_size: 1
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
parameters [{key:"op" value {string_value:"sleep"}}, {key:"sleep_ms" value {string_value:"500"}}]
dynamic_batching { }""",
    "batched": """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]
parameters {key:"op" value {string_value:"add_sub"}}
dynamic_batching { max_queue_delay_microseconds: 2000000 }""",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("scheduling-models")
    for name, config in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    with ServerProcess(
        repo, "--backend-plugin", "numpy_backend:NumpyPlugin", env={"PYTHONPATH": pythonpath}
    ) as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


def _http_step(client, model, value, corrid, start=False, end=False):
    tensor = httpclient.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], np.int32))
    result = client.infer(model, [tensor], sequence_id=corrid, sequence_start=start, sequence_end=end)
    return int(result.as_numpy("OUTPUT").reshape(-1)[0]), result.as_numpy("CONTROLS").reshape(-1).tolist()


def _grpc_step(client, model, value, corrid, start=False, end=False):
    tensor = grpcclient.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], np.int32))
    result = client.infer(model, [tensor], sequence_id=corrid, sequence_start=start, sequence_end=end)
    return int(result.as_numpy("OUTPUT").reshape(-1)[0]), result.as_numpy("CONTROLS").reshape(-1).tolist()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model, ids", [("accumulate", (7001, 7002)), ("accumulate_str", ("left", "right"))])
def test_interleaved_sequences_over_the_wire(server, protocol, model, ids):
    if protocol == "http":
        client, step = httpclient.InferenceServerClient(server.http_url), _http_step
        ids = tuple(f"h{i}" if isinstance(i, str) else i for i in ids)
    else:
        client, step = grpcclient.InferenceServerClient(server.grpc_url), _grpc_step
        ids = tuple(f"g{i}" if isinstance(i, str) else i + 100 for i in ids)
    a, b = ids
    assert step(client, model, 1, a, start=True) == (1, [1, 0, 1])
    assert step(client, model, 10, b, start=True) == (10, [1, 0, 1])
    assert step(client, model, 2, a) == (3, [0, 0, 1])
    assert step(client, model, 20, b, end=True) == (30, [0, 1, 1])
    assert step(client, model, 3, a, end=True) == (6, [0, 1, 1])
    client.close()


def test_sequence_errors_map_to_each_protocols_status(server):
    http = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as info:
        _http_step(http, "accumulate", 1, 999)
    assert info.value.status() == "400" and "START" in info.value.message()
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException) as info:
        _grpc_step(grpc, "accumulate", 1, 999)
    assert info.value.status() == "StatusCode.INVALID_ARGUMENT" and "START" in info.value.message()
    http.close()
    grpc.close()


def test_queue_limit_and_timeout_over_http_and_grpc(server):
    async def go():
        def http_input():
            tensor = httpaio.InferInput("INPUT0", [1, 1], "FP32")
            tensor.set_data_from_numpy(np.ones((1, 1), np.float32))
            return [tensor]

        def grpc_input():
            tensor = grpcaio.InferInput("INPUT0", [1, 1], "FP32")
            tensor.set_data_from_numpy(np.ones((1, 1), np.float32))
            return [tensor]

        async def outcome(coro):
            try:
                await coro
                return "ok"
            except InferenceServerException as error:
                return f"{error.status()} {error.message()}"

        http = httpaio.InferenceServerClient(server.http_url)
        grpc = grpcaio.InferenceServerClient(server.grpc_url)
        try:
            # One runs, one waits in the queue (max_queue_size 1), the rest are refused.
            results = await asyncio.gather(
                *(outcome(http.infer("slow_queue", http_input())) for _ in range(3)),
                *(outcome(grpc.infer("slow_queue", grpc_input())) for _ in range(3)),
            )
            refused = [r for r in results if r != "ok"]
            assert results.count("ok") >= 1 and refused
            assert all(r.startswith(("503 ", "StatusCode.UNAVAILABLE ")) and "max_queue_size" in r for r in refused)

            # A request whose own timeout (20 ms) passes while the instance is busy is refused.
            async def started() -> int:
                stats = (await http.get_inference_statistics("slow_queue"))["model_stats"][0]
                return int(stats["inference_stats"]["queue"]["count"])

            before = await started()
            first = asyncio.ensure_future(outcome(http.infer("slow_queue", http_input())))
            while await started() == before:  # until the first request is executing
                await asyncio.sleep(0.01)
            late = await outcome(grpc.infer("slow_queue", grpc_input(), timeout=20_000))
            assert late.startswith("StatusCode.UNAVAILABLE") and "timed out" in late
            assert await first == "ok"
        finally:
            await http.close()
            await grpc.close()

    asyncio.run(go())


def test_concurrent_http_requests_are_batched(server):
    async def go():
        client = httpaio.InferenceServerClient(server.http_url)
        try:

            def inputs(value):
                tensors = [httpaio.InferInput("INPUT0", [1, 4], "FP32"), httpaio.InferInput("INPUT1", [1, 4], "FP32")]
                tensors[0].set_data_from_numpy(np.full((1, 4), value, np.float32))
                tensors[1].set_data_from_numpy(np.ones((1, 4), np.float32))
                return tensors

            results = await asyncio.gather(*(client.infer("batched", inputs(i)) for i in range(16)))
            for i, result in enumerate(results):
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 4), i + 1, np.float32))
            stats = (await client.get_inference_statistics("batched"))["model_stats"][0]
            assert int(stats["inference_count"]) == 16
            assert int(stats["execution_count"]) < 16
            assert all(int(b["batch_size"]) > 1 for b in stats["batch_stats"])
        finally:
            await client.close()

    asyncio.run(go())


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_request_of_a_client_that_gave_up_is_dropped_from_the_queue(server, protocol):
    async def go():
        if protocol == "grpc":
            client, module = grpcaio.InferenceServerClient(server.grpc_url), grpcaio
        else:
            client, module = httpaio.InferenceServerClient(server.http_url), httpaio

        def one():
            tensor = module.InferInput("INPUT0", [1, 1], "FP32")
            tensor.set_data_from_numpy(np.ones((1, 1), np.float32))
            return [tensor]

        async def stats():
            if protocol == "grpc":
                return (await client.get_inference_statistics("slow", as_json=True))["model_stats"][0]
            return (await client.get_inference_statistics("slow"))["model_stats"][0]

        def count(stats, kind):  # gRPC's JSON leaves zero counts out
            return int(stats["inference_stats"].get(kind, {}).get("count", 0))

        try:
            before = await stats()
            started = count(before, "queue")
            first = asyncio.ensure_future(client.infer("slow", one()))
            while count(await stats(), "queue") == started:
                await asyncio.sleep(0.01)
            # Queued behind the running request, then abandoned by its client.
            with pytest.raises((InferenceServerException, asyncio.TimeoutError)):
                if protocol == "grpc":
                    await client.infer("slow", one(), client_timeout=0.1)
                else:
                    await asyncio.wait_for(client.infer("slow", one()), 0.1)
            await first
            after = await stats()
            # Only the first request executed; the abandoned one failed as cancelled.
            assert int(after.get("inference_count", 0)) == int(before.get("inference_count", 0)) + 1
            assert count(after, "fail") == count(before, "fail") + 1
        finally:
            await client.close()

    asyncio.run(go())
