"""RepositoryIndex, RepositoryModelLoad (with a config override) and RepositoryModelUnload
through tritonclient.grpc, on a server in explicit model control mode."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.grpc as tg
from grpc_servers import expect_error, numpy_server, write_repository


@pytest.fixture(scope="module")
def explicit(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("explicit"), ["add_sub", "identity"])
    with numpy_server(repo, "--model-control-mode", "explicit", "--load-model", "add_sub") as process:
        with tg.InferenceServerClient(process.grpc_url) as client:
            yield client


def index(client):
    return [(m.name, m.version, m.state) for m in client.get_model_repository_index().models]


def identity_input(n=3):
    tensor = tg.InferInput("INPUT0", [n], "FP32")
    tensor.set_data_from_numpy(np.arange(n, dtype=np.float32))
    return [tensor]


def test_load_infer_unload(explicit):
    assert index(explicit) == [("add_sub", "1", "READY"), ("identity", "", "")]
    assert not explicit.is_model_ready("identity")
    explicit.load_model("identity")
    assert explicit.is_model_ready("identity")
    np.testing.assert_array_equal(explicit.infer("identity", identity_input()).as_numpy("OUTPUT0"), [0, 1, 2])
    explicit.unload_model("identity")
    assert not explicit.is_model_ready("identity")
    rows = explicit.get_model_repository_index().models
    assert [(m.name, m.state, m.reason) for m in rows if m.name == "identity"] == [
        ("identity", "UNAVAILABLE", "unloaded")
    ]
    expect_error(lambda: explicit.infer("identity", identity_input()), "UNAVAILABLE", "'identity'", "not ready")


def test_load_with_config_override(explicit):
    config = explicit.get_model_config("add_sub", as_json=True)["config"]
    override = {
        "backend": "numpy",
        "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [2]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [2]}],
    }
    assert config["backend"] == "numpy"
    explicit.load_model("identity", config=json.dumps(override))
    loaded = explicit.get_model_config("identity", as_json=True)["config"]
    assert loaded["input"][0]["dims"] == ["2"]
    expect_error(lambda: explicit.infer("identity", identity_input(3)), "INVALID_ARGUMENT", "Expected [2]")
    np.testing.assert_array_equal(explicit.infer("identity", identity_input(2)).as_numpy("OUTPUT0"), [0, 1])
    explicit.unload_model("identity")


def test_load_errors(explicit):
    expect_error(
        lambda: explicit.load_model("nope"),
        "INTERNAL",
        "failed to load 'nope', failed to poll from model repository",
        "no model directory",
    )
    # Triton answers a config override it cannot read as a failed poll.
    expect_error(
        lambda: explicit.load_model("identity", config="{not json"),
        "INTERNAL",
        "failed to poll from model repository",
        "'config' parameter is not valid JSON",
    )
    expect_error(lambda: explicit.load_model("identity", config="[1]"), "INTERNAL", "JSON object")
    expect_error(
        lambda: explicit.load_model("identity", config=json.dumps({"max_batch_size": "x"})),
        "INVALID_ARGUMENT",
        "'identity'",
        "max_batch_size",
    )
    expect_error(
        lambda: explicit.load_model("evil", files={"file:../evil.py": b"x"}, config="{}"),
        "INVALID_ARGUMENT",
        "Invalid file parameter 'file:../evil.py' must stay within model directory",
    )
    expect_error(
        lambda: explicit.load_model("evil", files={"file:1/a.bin": b"x"}),
        "INVALID_ARGUMENT",
        "model files were sent without a config",
    )
    explicit.unload_model("nope")  # Triton answers success for a model it never loaded
    # The failures left the server serving.
    assert explicit.is_model_ready("add_sub") and explicit.is_server_live()


def test_load_uploaded_files_and_unload_dependents(explicit):
    config = {
        "backend": "numpy",
        "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    }
    explicit.load_model("uploaded", config=json.dumps(config), files={"file:1/weights.bin": b"\x00\x01"})
    np.testing.assert_array_equal(explicit.infer("uploaded", identity_input(2)).as_numpy("OUTPUT0"), [0, 1])
    ensemble = {
        "platform": "ensemble",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [-1]}],
        "ensemble_scheduling": {
            "step": [
                {
                    "model_name": "uploaded",
                    "model_version": -1,
                    "input_map": {"INPUT0": "IN"},
                    "output_map": {"OUTPUT0": "OUT"},
                }
            ]
        },
    }
    explicit.load_model("pipeline", config=json.dumps(ensemble), files={"file:1/.keep": b""})
    assert explicit.is_model_ready("pipeline")
    # Triton's unload_dependents: an ensemble's step models go with it.
    explicit.unload_model("pipeline", unload_dependents=True)
    assert not explicit.is_model_ready("pipeline") and not explicit.is_model_ready("uploaded")


def test_load_refused_outside_explicit_mode(url):
    with tg.InferenceServerClient(url) as client:
        expect_error(lambda: client.load_model("identity"), "UNAVAILABLE", "model control mode 'none'")
        expect_error(lambda: client.unload_model("identity"), "UNAVAILABLE", "model control mode 'none'")
        assert client.is_model_ready("identity")
