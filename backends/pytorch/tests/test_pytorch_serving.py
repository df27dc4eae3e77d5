"""The PyTorch backend served through the in-process naiad.Server: outputs equal the
module run directly on the same inputs."""

from __future__ import annotations

import asyncio
from importlib.metadata import entry_points

import numpy as np
import pytest
import torch
import torch_models

from naiad import ErrorCode, InferenceRequest, NaiadError, RequestedOutput, Tensor

MLP_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 64
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 8 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "1" } }
"""

# Building TorchScript test models is the point; torch 2.9+ deprecates the API.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

ADD_SUB_NAMED = """
backend: "pytorch"
max_batch_size: 8
input [ { name: "b" data_type: TYPE_INT32 dims: [ 4 ] },
        { name: "a" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__1" data_type: TYPE_INT32 dims: [ 4 ] },
         { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 4 ] } ]
"""


def request(model: str, outputs=(), **arrays: np.ndarray) -> InferenceRequest:
    return InferenceRequest(
        model,
        [Tensor.from_numpy(name, array) for name, array in arrays.items()],
        outputs=[RequestedOutput(name) for name in outputs],
    )


def test_entry_point_registers_pytorch():
    names = {ep.name: ep.value for ep in entry_points(group="naiad.backends")}
    assert names.get("pytorch") == "naiad_backend_pytorch.plugin"


def test_torchscript_mlp_matches_torch(tmp_path):
    scripted = torch_models.script(torch_models.MLP(), tmp_path / "mlp" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "mlp", MLP_CONFIG)
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((n, 16)).astype(np.float32) for n in (1, 7, 64)]

    async def body(server):
        responses = await asyncio.gather(*(server.infer(request("mlp", INPUT__0=x)) for x in batches))
        return responses, server.model_metadata("mlp")

    responses, metadata = torch_models.serve(tmp_path, body)
    assert metadata["platform"] == "pytorch_libtorch"
    for x, response in zip(batches, responses):
        with torch.inference_mode():
            expected = scripted(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(response.output("OUTPUT__0").data, expected, rtol=1e-6)


def test_inputs_by_forward_argument_names_and_indexed_outputs(tmp_path):
    torch_models.script(torch_models.AddSub(), tmp_path / "add_sub" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "add_sub", ADD_SUB_NAMED)
    a = np.arange(8, dtype=np.int32).reshape(2, 4)
    b = np.full((2, 4), 3, np.int32)

    async def body(server):
        return await server.infer(request("add_sub", a=a, b=b))

    response = torch_models.serve(tmp_path, body)
    np.testing.assert_array_equal(response.output("OUTPUT__0").data, a + b)
    np.testing.assert_array_equal(response.output("OUTPUT__1").data, a - b)


def test_dict_outputs_by_name(tmp_path):
    torch_models.script(torch_models.AddSubDict(), tmp_path / "d" / "1" / "model.pt")
    torch_models.write_config(
        tmp_path,
        "d",
        """
backend: "pytorch" max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP64 dims: [ 2 ] }, { name: "INPUT__1" data_type: TYPE_FP64 dims: [ 2 ] } ]
output [ { name: "difference" data_type: TYPE_FP64 dims: [ 2 ] }, { name: "sum" data_type: TYPE_FP64 dims: [ 2 ] } ]
""",
    )
    a, b = np.array([[1.5, 2.0]]), np.array([[0.5, 4.0]])

    async def body(server):
        return await server.infer(request("d", ["sum"], INPUT__0=a, INPUT__1=b))

    response = torch_models.serve(tmp_path, body)
    assert [t.name for t in response.outputs] == ["sum"]
    np.testing.assert_array_equal(response.output("sum").data, a + b)


NUMERIC = [
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
]


def test_every_numeric_datatype_round_trips(tmp_path):
    for datatype in NUMERIC:
        name = f"identity_{datatype.lower()}"
        torch_models.script(torch_models.Identity(), tmp_path / name / "1" / "model.pt")
        config_type = f"TYPE_{datatype}"
        torch_models.write_config(
            tmp_path,
            name,
            f"""
backend: "pytorch" max_batch_size: 4
input [ {{ name: "INPUT__0" data_type: {config_type} dims: [ 3 ] }} ]
output [ {{ name: "OUTPUT__0" data_type: {config_type} dims: [ 3 ] }} ]""",
        )
    rng = np.random.default_rng(1)

    async def body(server):
        results = {}
        for datatype in NUMERIC:
            if datatype == "BF16":
                data = np.array([[0x3F80, 0x4000, 0xC040]], dtype=np.uint16)  # 1.0, 2.0, -3.0
                tensor = Tensor("INPUT__0", "BF16", (1, 3), data)
            else:
                from naiad.backend.helpers import numpy_dtype

                data = (rng.standard_normal((2, 3)) * 50).astype(numpy_dtype(datatype))
                tensor = Tensor.from_numpy("INPUT__0", data)
            response = await server.infer(InferenceRequest(f"identity_{datatype.lower()}", [tensor]))
            results[datatype] = (data, response.output("OUTPUT__0"))
        return results

    for datatype, (data, output) in torch_models.serve(tmp_path, body).items():
        assert output.datatype == datatype
        assert output.data.dtype == data.dtype
        np.testing.assert_array_equal(output.data, data)


def test_string_lists_in_and_out(tmp_path):
    scripted = torch_models.script(torch_models.Shout(), tmp_path / "shout" / "1" / "model.pt")
    torch_models.write_config(
        tmp_path,
        "shout",
        """
backend: "pytorch"
input [ { name: "INPUT__0" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_STRING dims: [ -1 ] } ]""",
    )
    words = np.array([b"hello", "caf\u00e9".encode()], dtype=object)

    async def body(server):
        return await server.infer(request("shout", INPUT__0=words))

    output = torch_models.serve(tmp_path, body).output("OUTPUT__0")
    assert output.datatype == "BYTES"
    expected = scripted([w.decode() for w in words])
    assert output.data.tolist() == [w.encode() for w in expected]
    assert output.data.tolist()[0] == b"HELLO!"


def test_framework_shape_error_is_per_request_and_server_keeps_serving(tmp_path):
    torch_models.script(torch_models.MLP(), tmp_path / "mlp" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "mlp", MLP_CONFIG.replace("dims: [ 16 ]", "dims: [ -1 ]"))
    good = np.ones((1, 16), np.float32)

    async def body(server):
        with pytest.raises(NaiadError) as info:
            await server.infer(request("mlp", INPUT__0=np.ones((1, 5), np.float32)))
        return info.value, await server.infer(request("mlp", INPUT__0=good))

    error, after = torch_models.serve(tmp_path, body)
    assert error.code is ErrorCode.INVALID_ARG
    assert "PyTorch failed on the inputs" in error.message and "1x5" in error.message
    assert after.output("OUTPUT__0").shape == (1, 8)


def test_torchscript_without_config_fails_with_a_reason(tmp_path):
    torch_models.script(torch_models.AddSub(), tmp_path / "bare" / "1" / "model.pt")
    torch_models.script(torch_models.AddSub(), tmp_path / "three" / "1" / "model.pt")
    torch_models.write_config(
        tmp_path, "three", ADD_SUB_NAMED.replace("input [", 'input [ { name: "c" data_type: TYPE_INT32 dims: [ 4 ] },')
    )

    async def body(server):
        return {row["name"]: row for row in server.repository_index()}

    index = torch_models.serve(tmp_path, body)
    assert index["bare"]["state"] == "UNAVAILABLE"
    assert "TorchScript" in index["bare"]["reason"] and "a, b" in index["bare"]["reason"]
    assert "unable to load model 'three', configuration expects 3 inputs, model provides 2" in index["three"]["reason"]


def test_output_type_mismatch_is_a_clear_error(tmp_path):
    torch_models.script(torch_models.Identity(), tmp_path / "m" / "1" / "model.pt")
    torch_models.write_config(
        tmp_path,
        "m",
        """
backend: "pytorch" max_batch_size: 2
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT64 dims: [ 1 ] } ]""",
    )

    async def body(server):
        with pytest.raises(NaiadError) as info:
            await server.infer(request("m", INPUT__0=np.ones((1, 1), np.float32)))
        return info.value

    error = torch_models.serve(tmp_path, body)
    assert "output 'OUTPUT__0' is FP32 from the model, the config declares INT64" in error.message


def test_dynamic_batching_answers_every_request_with_its_own_rows(tmp_path):
    scripted = torch_models.script(torch_models.MLP(), tmp_path / "mlp" / "1" / "model.pt")
    config = MLP_CONFIG.replace("count: 2", "count: 1") + "dynamic_batching { max_queue_delay_microseconds: 20000 }\n"
    torch_models.write_config(tmp_path, "mlp", config)
    rng = np.random.default_rng(8)
    batches = [rng.standard_normal((n, 16)).astype(np.float32) for n in (1, 3, 2, 1, 4, 1, 2, 2)]

    async def body(server):
        return await asyncio.gather(*(server.infer(request("mlp", INPUT__0=x)) for x in batches))

    for x, response in zip(batches, torch_models.serve(tmp_path, body)):
        with torch.inference_mode():
            expected = scripted(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(response.output("OUTPUT__0").data, expected, rtol=1e-5)


def test_execution_parameters(tmp_path):
    scripted = torch_models.script(torch_models.MLP(), tmp_path / "tuned" / "1" / "model.pt")
    torch_models.write_config(
        tmp_path,
        "tuned",
        MLP_CONFIG
        + """
parameters { key: "INFERENCE_MODE" value { string_value: "false" } }
parameters { key: "DISABLE_OPTIMIZED_EXECUTION" value { string_value: "true" } }
parameters { key: "INTER_OP_THREAD_COUNT" value { string_value: "1" } }""",
    )
    torch_models.script(torch_models.MLP(), tmp_path / "bad" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "bad", MLP_CONFIG.replace('string_value: "1"', 'string_value: "lots"'))
    x = np.ones((2, 16), np.float32)

    async def body(server):
        response = await server.infer(request("tuned", INPUT__0=x))
        return response, {row["name"]: row for row in server.repository_index()}

    response, index = torch_models.serve(tmp_path, body)
    with torch.no_grad():
        np.testing.assert_allclose(response.output("OUTPUT__0").data, scripted(torch.from_numpy(x)).numpy(), rtol=1e-6)
    assert index["bad"]["state"] == "UNAVAILABLE"
    assert "parameters.INTRA_OP_THREAD_COUNT: expected an integer, got 'lots'" in index["bad"]["reason"]
