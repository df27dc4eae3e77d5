"""Auto-complete: a model directory holding only model.onnx serves, and its config and
metadata come from the model file."""

from __future__ import annotations

import numpy as np
import onnx_models
from onnx import TensorProto

from naiad import InferenceRequest, Tensor


def test_directory_with_only_model_onnx_serves(tmp_path):
    onnx_models.write_model(tmp_path, "mlp", onnx_models.mlp())
    x = np.ones((3, 16), np.float32)

    async def body(server):
        response = await server.infer(InferenceRequest("mlp", [Tensor.from_numpy("input", x)]))
        return response, server.model_metadata("mlp"), server.model_config("mlp")

    response, metadata, config = onnx_models.serve(tmp_path, body)
    assert metadata["platform"] == "onnxruntime_onnx"
    assert metadata["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 16]}]
    assert metadata["outputs"] == [
        {"name": "probabilities", "datatype": "FP32", "shape": [-1, 8]},
        {"name": "logits", "datatype": "FP32", "shape": [-1, 8]},
    ]
    assert config.max_batch_size == 4  # the backend's default-max-batch-size
    assert config.scheduling == "dynamic_batching"
    assert response.output("probabilities").shape == (3, 8)


def test_fixed_first_dimension_means_no_batching(tmp_path):
    onnx_models.write_model(tmp_path, "fixed", onnx_models.add_sub(TensorProto.INT32, dims=(2, 3)))

    async def body(server):
        return server.model_metadata("fixed"), server.model_config("fixed")

    metadata, config = onnx_models.serve(tmp_path, body)
    assert config.max_batch_size == 0
    assert metadata["inputs"][0] == {"name": "INPUT0", "datatype": "INT32", "shape": [2, 3]}


def test_partial_config_is_completed_and_backend_config_sets_the_batch_size(tmp_path):
    onnx_models.write_model(
        tmp_path,
        "add_sub",
        onnx_models.add_sub(),
        'input [ { name: "INPUT0" }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]',
    )

    async def body(server):
        return server.model_config("add_sub")

    config = onnx_models.serve(tmp_path, body, backend_config={"onnxruntime": {"default-max-batch-size": "16"}})
    assert config.max_batch_size == 16
    assert [(s.name, s.datatype, s.dims) for s in config.inputs] == [("INPUT0", "FP32", (4,)), ("INPUT1", "FP32", (4,))]
    assert [s.name for s in config.outputs] == ["OUTPUT0", "OUTPUT1"]


def test_auto_complete_disabled_needs_a_config(tmp_path):
    onnx_models.write_model(tmp_path, "mlp", onnx_models.mlp())

    async def body(server):
        return {row["name"]: row for row in server.repository_index()}

    index = onnx_models.serve(tmp_path, body, auto_complete_config=False)
    assert index["mlp"]["state"] == "UNAVAILABLE" and "auto-complete is disabled" in index["mlp"]["reason"]
