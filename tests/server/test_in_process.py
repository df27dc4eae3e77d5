import asyncio

import numpy as np
import pytest
from numpy_backend import NumpyPlugin

from naiad import ErrorCode, InferenceRequest, NaiadError, Server, ServerOptions, Tensor

ADD_SUB = """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]
parameters {key:"op" value {string_value:"add_sub"}}"""


def make_model(repo, name, config, versions=(1,)):
    for v in versions:
        (repo / name / str(v)).mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(config)


def run(coro):
    return asyncio.run(coro)


def test_add_sub_in_process(tmp_path):
    make_model(tmp_path, "add_sub", ADD_SUB)

    async def go():
        async with Server(ServerOptions([str(tmp_path)], backend_plugins=[NumpyPlugin()])) as server:
            a = np.arange(8, dtype=np.float32).reshape(2, 4)
            b = np.ones((2, 4), np.float32)
            response = await server.infer(
                InferenceRequest("add_sub", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", b)])
            )
            assert response.model_version == "1"
            np.testing.assert_array_equal(response.output("OUTPUT0").data, a + b)
            np.testing.assert_array_equal(response.output("OUTPUT1").data, a - b)
            stats = server.statistics("add_sub")[0]
            assert stats["inference_count"] == 2 and stats["execution_count"] == 1
            with pytest.raises(NaiadError) as info:
                await server.infer(InferenceRequest("add_sub", [Tensor.from_numpy("INPUT0", a)]))
            assert info.value.code is ErrorCode.INVALID_ARG and "'INPUT1'" in info.value.message

    run(go())


SLOW = """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_INT32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_INT32 dims:[-1]}]
parameters {key:"op" value {string_value:"sleep"}}
parameters {key:"sleep_ms" value {string_value:"200"}}"""


def test_drain_finishes_in_flight_and_refuses_new(tmp_path):
    make_model(tmp_path, "slow", SLOW)

    async def go():
        async with Server(ServerOptions([str(tmp_path)], backend_plugins=[NumpyPlugin()])) as server:
            data = np.arange(3, dtype=np.int32)
            in_flight = asyncio.create_task(server.infer(InferenceRequest("slow", [Tensor.from_numpy("INPUT0", data)])))
            await asyncio.sleep(0.05)
            drained = asyncio.create_task(server.drain(timeout=10))
            await asyncio.sleep(0)
            with pytest.raises(NaiadError) as info:
                await server.infer(InferenceRequest("slow", [Tensor.from_numpy("INPUT0", data)]))
            assert info.value.code is ErrorCode.UNAVAILABLE and "shutting down" in info.value.message
            np.testing.assert_array_equal((await in_flight).output("OUTPUT0").data, data)
            assert await drained is True

    run(go())
