"""A max_batch_size the config writes is the user's, 0 included: ONNX auto-complete fills only
an absent one (Triton's model configuration docs: for a model that could batch,
max_batch_size 0 means it does not), and says so in the log when it fills one. Through
tritonclient against `naiad serve`, with config.pbtxt and with a load's JSON override."""

from __future__ import annotations

import json

import numpy as np
import onnx_models
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto

from naiad.testing import ServerProcess


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    repository = tmp_path_factory.mktemp("onnx_written_max_batch_size")
    model = onnx_models.identity(TensorProto.FLOAT, dims=("batch", 3))  # could batch: first dimension open
    onnx_models.write_model(repository, "explicit_zero", model, "max_batch_size: 0")
    onnx_models.write_model(repository, "absent", model, 'backend: "onnxruntime"')
    with ServerProcess(repository, "--model-control-mode", "explicit", "--allow-metrics", "false") as server:
        yield server, httpclient.InferenceServerClient(server.http_url)


def _identity(client, model: str, data: np.ndarray) -> np.ndarray:
    request = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
    request.set_data_from_numpy(data)
    return client.infer(model, [request]).as_numpy("OUTPUT0")


def test_an_explicit_zero_in_config_pbtxt_keeps_batching_off(served):
    server, client = served
    client.load_model("explicit_zero")
    config = client.get_model_config("explicit_zero")
    assert config.get("max_batch_size", 0) == 0
    assert "dynamic_batching" not in config or config["dynamic_batching"] is None
    # Without batching the first dimension is the model's own: it is part of dims.
    assert config["input"][0]["dims"] == [-1, 3]
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_identity(client, "explicit_zero", data), data)
    assert "model 'explicit_zero': auto-complete" not in server.log()


def test_an_absent_max_batch_size_is_filled_and_the_log_says_so(served):
    server, client = served
    client.load_model("absent")
    config = client.get_model_config("absent")
    assert config["max_batch_size"] == 4
    assert config["input"][0]["dims"] == [3]
    assert (
        "model 'absent': auto-complete set max_batch_size to 4, since the model supports batching and the config "
        "gives no max_batch_size; write max_batch_size in the config to choose another (0 turns batching off)"
    ) in server.log()


def test_an_explicit_zero_in_a_config_override_keeps_batching_off(served):
    _, client = served
    client.load_model("absent", config=json.dumps({"backend": "onnxruntime", "max_batch_size": 0}))
    config = client.get_model_config("absent")
    assert config.get("max_batch_size", 0) == 0
    assert config["input"][0]["dims"] == [-1, 3]
