"""ONNX models served by `naiad serve` and called through tritonclient over HTTP (binary
tensors) and gRPC. Skipped when the frontends are not installed."""

from __future__ import annotations

import importlib.util

import numpy as np
import onnx_models
import onnxruntime as ort
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("naiad.frontends.http") is None
    or importlib.util.find_spec("naiad.frontends.grpc") is None,
    reason="naiad.frontends.http / naiad.frontends.grpc are not installed",
)

ADD_SUB = """
platform: "onnxruntime_onnx" max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from naiad.testing import ServerProcess

    repo = tmp_path_factory.mktemp("repo")
    onnx_models.write_model(repo, "add_sub", onnx_models.add_sub(), ADD_SUB)
    onnx_models.write_model(repo, "mlp", onnx_models.mlp())  # no config: auto-complete
    with ServerProcess(repo) as server:
        yield server


def _clients(server):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    return [
        (httpclient, httpclient.InferenceServerClient(server.http_url)),
        (grpcclient, grpcclient.InferenceServerClient(server.grpc_url)),
    ]


def test_mlp_over_http_and_grpc_matches_onnxruntime(served):
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    expected = ort.InferenceSession(onnx_models.mlp()).run(["probabilities", "logits"], {"input": x})
    for module, client in _clients(served):
        tensor = module.InferInput("input", list(x.shape), "FP32")
        if module.__name__.endswith("http"):
            tensor.set_data_from_numpy(x, binary_data=True)
            outputs = [module.InferRequestedOutput(n, binary_data=True) for n in ("probabilities", "logits")]
        else:
            tensor.set_data_from_numpy(x)
            outputs = [module.InferRequestedOutput(n) for n in ("probabilities", "logits")]
        result = client.infer("mlp", [tensor], outputs=outputs)
        np.testing.assert_allclose(result.as_numpy("probabilities"), expected[0], rtol=1e-6)
        np.testing.assert_allclose(result.as_numpy("logits"), expected[1], rtol=1e-6)


def test_auto_completed_metadata_over_http_and_grpc(served):
    for module, client in _clients(served):
        if module.__name__.endswith("http"):
            metadata = client.get_model_metadata("mlp")
            inputs = [(i["name"], i["datatype"], i["shape"]) for i in metadata["inputs"]]
            outputs = [(o["name"], o["datatype"], o["shape"]) for o in metadata["outputs"]]
        else:
            metadata = client.get_model_metadata("mlp")
            inputs = [(i.name, i.datatype, list(i.shape)) for i in metadata.inputs]
            outputs = [(o.name, o.datatype, list(o.shape)) for o in metadata.outputs]
        assert inputs == [("input", "FP32", [-1, 16])]
        assert outputs == [("probabilities", "FP32", [-1, 8]), ("logits", "FP32", [-1, 8])]


def test_framework_refusal_is_a_client_error_and_serving_continues(served):
    from tritonclient.utils import InferenceServerException

    for module, client in _clients(served):
        bad = [module.InferInput(n, [1, 5], "FP32") for n in ("INPUT0", "INPUT1")]
        for tensor in bad:
            tensor.set_data_from_numpy(np.ones((1, 5), np.float32))
        with pytest.raises(InferenceServerException) as info:
            client.infer("add_sub", bad)
        assert "Got: 5 Expected: 4" in str(info.value)
        good = [module.InferInput(n, [2, 4], "FP32") for n in ("INPUT0", "INPUT1")]
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        for tensor in good:
            tensor.set_data_from_numpy(a)
        result = client.infer("add_sub", good)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)
