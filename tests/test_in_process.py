import asyncio

import numpy as np
import pytest

from naiad import ErrorCode, InferenceRequest, NaiadError, Server, ServerOptions, Tensor
from numpy_backend import NumpyPlugin

ADD_SUB = '''backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]
parameters {key:"op" value {string_value:"add_sub"}}'''


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
