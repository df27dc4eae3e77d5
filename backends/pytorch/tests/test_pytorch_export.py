"""torch.export programs (model.pt2): served with and without a config; auto-complete
reads inputs, outputs, datatypes and dims from the program."""

from __future__ import annotations

import numpy as np
import torch
import torch_models
import tritonclient.http as httpclient

from naiad import InferenceRequest, Tensor
from naiad.testing import ServerProcess


def test_exported_mlp_without_config_serves_and_describes_itself(tmp_path):
    program = torch_models.export(torch_models.MLP(), (torch.randn(2, 16),), tmp_path / "mlp" / "1" / "model.pt2")
    x = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)

    async def body(server):
        response = await server.infer(InferenceRequest("mlp", [Tensor.from_numpy("x", x)]))
        return response, server.model_metadata("mlp"), server.model_config("mlp")

    response, metadata, config = torch_models.serve(tmp_path, body)
    assert metadata["platform"] == "pytorch_libtorch"
    assert metadata["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
    assert metadata["outputs"] == [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [-1, 8]}]
    assert config.max_batch_size == 4 and config.scheduling == "dynamic_batching"
    with torch.inference_mode():
        expected = program.module()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(response.output("OUTPUT__0").data, expected, rtol=1e-6)


def test_exported_dict_outputs_are_named_by_their_keys(tmp_path):
    example = (torch.ones(2, 3, dtype=torch.int64), torch.ones(2, 3, dtype=torch.int64))
    torch_models.export(torch_models.AddSubDict(), example, tmp_path / "d" / "1" / "model.pt2", batch_dim=False)
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.full((2, 3), 2, np.int64)

    async def body(server):
        response = await server.infer(InferenceRequest("d", [Tensor.from_numpy("a", a), Tensor.from_numpy("b", b)]))
        return response, server.model_metadata("d"), server.model_config("d")

    response, metadata, config = torch_models.serve(tmp_path, body)
    assert config.max_batch_size == 0
    assert metadata["inputs"] == [
        {"name": "a", "datatype": "INT64", "shape": [2, 3]},
        {"name": "b", "datatype": "INT64", "shape": [2, 3]},
    ]
    assert sorted(o["name"] for o in metadata["outputs"]) == ["difference", "sum"]
    np.testing.assert_array_equal(response.output("sum").data, a + b)
    np.testing.assert_array_equal(response.output("difference").data, a - b)


def test_exported_program_with_a_config(tmp_path):
    torch_models.export(torch_models.AddSub(), (torch.ones(2, 4), torch.ones(2, 4)), tmp_path / "m" / "1" / "model.pt2")
    torch_models.write_config(
        tmp_path,
        "m",
        """
platform: "pytorch_libtorch" default_model_filename: "model.pt2" max_batch_size: 16
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
""",
    )
    a = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    b = np.ones((3, 4), np.float32)

    async def body(server):
        return await server.infer(
            InferenceRequest("m", [Tensor.from_numpy("INPUT__0", a), Tensor.from_numpy("INPUT__1", b)])
        )

    response = torch_models.serve(tmp_path, body)
    np.testing.assert_array_equal(response.output("OUTPUT__0").data, a + b)
    np.testing.assert_array_equal(response.output("OUTPUT__1").data, a - b)


def test_config_that_contradicts_the_program_fails_the_load(tmp_path):
    torch_models.export(torch_models.AddSub(), (torch.ones(2, 4), torch.ones(2, 4)), tmp_path / "m" / "1" / "model.pt2")
    torch_models.write_config(
        tmp_path,
        "m",
        """
backend: "pytorch" max_batch_size: 16
input [ { name: "a" data_type: TYPE_INT32 dims: [ 4 ] }, { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
""",
    )
    torch_models.export(torch_models.AddSub(), (torch.ones(2, 4), torch.ones(2, 4)), tmp_path / "w" / "1" / "model.pt2")
    torch_models.write_config(
        tmp_path,
        "w",
        """
backend: "pytorch" max_batch_size: 16
input [ { name: "a" data_type: TYPE_FP32 dims: [ 5 ] }, { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
""",
    )

    async def body(server):
        return {row["name"]: row for row in server.repository_index()}

    index = torch_models.serve(tmp_path, body)
    assert index["m"]["state"] == "UNAVAILABLE"
    assert "input 'a': the config says data_type INT32, the program has FP32" in index["m"]["reason"]
    assert "input 'a': the config's shape [-1, 5]" in index["w"]["reason"]


def test_a_written_max_batch_size_0_keeps_an_exported_program_from_batching(tmp_path):
    """Auto-complete fills only a max_batch_size the config leaves out; a written 0 means the
    model does not batch (Triton's model configuration docs), so the program's first
    dimension stays part of dims. Through tritonclient against `naiad serve`."""
    program = torch_models.export(torch_models.MLP(), (torch.randn(2, 16),), tmp_path / "mlp" / "1" / "model.pt2")
    torch_models.write_config(
        tmp_path, "mlp", 'backend: "pytorch" default_model_filename: "model.pt2" max_batch_size: 0'
    )
    x = np.random.default_rng(3).standard_normal((3, 16)).astype(np.float32)
    with ServerProcess(tmp_path, "--allow-grpc", "false", "--allow-metrics", "false") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        config = client.get_model_config("mlp")
        request = httpclient.InferInput("x", [3, 16], "FP32")
        request.set_data_from_numpy(x)
        result = client.infer("mlp", [request]).as_numpy("OUTPUT__0")
        log = server.log()
    assert config.get("max_batch_size", 0) == 0 and "dynamic_batching" not in config
    assert config["input"][0]["dims"] == [-1, 16]
    with torch.inference_mode():
        np.testing.assert_allclose(result, program.module()(torch.from_numpy(x)).numpy(), rtol=1e-6)
    assert "model 'mlp': auto-complete" not in log
