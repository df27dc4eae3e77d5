"""`naiad serve` as a real process, talked to with tritonclient over HTTP and gRPC.
Skips until the HTTP frontend (naiad.frontends.http) is installed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from naiad.testing import ServerProcess, gpu_ids

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("naiad.frontends.http") is None, reason="naiad.frontends.http is not built yet"
)


@pytest.fixture(scope="module")
def process(tf_repo):
    # The thread setting travels from the command line to every session's thread pools.
    with ServerProcess(
        tf_repo,
        "--backend-config",
        "tensorflow,intra-op-thread-count=1",
        "--backend-config",
        "tensorflow,default-max-batch-size=8",
    ) as server:
        yield server


def _expected(module, x, s):
    result = module.serve(x, s)
    return result["y"].numpy(), list(result["upper"].numpy())


X = np.array([[1, 2, 3, 4], [-1, 0, 0.5, 2]], dtype=np.float32)
S = np.array([[b"abc"], [b"xyz"]], dtype=object)


def test_http_savedmodel(process, module):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(process.http_url)
    assert client.is_model_ready("sm_auto")
    metadata = client.get_model_metadata("sm_auto")
    assert metadata["platform"] == "tensorflow_savedmodel"
    assert client.get_model_config("sm_auto")["max_batch_size"] == 8  # default-max-batch-size=8
    x = httpclient.InferInput("x", [2, 4], "FP32")
    x.set_data_from_numpy(X)
    s = httpclient.InferInput("s", [2, 1], "BYTES")
    s.set_data_from_numpy(S)
    result = client.infer("sm_auto", [x, s])
    y, upper = _expected(module, X, S.reshape(-1))
    np.testing.assert_allclose(result.as_numpy("y"), y, rtol=1e-6)
    assert list(result.as_numpy("upper").reshape(-1)) == upper


def test_grpc_graphdef(process, module):
    if importlib.util.find_spec("naiad.frontends.grpc") is None:
        pytest.skip("naiad.frontends.grpc is not built yet")
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(process.grpc_url)
    x = grpcclient.InferInput("x", [2, 4], "FP32")
    x.set_data_from_numpy(X)
    s = grpcclient.InferInput("s", [2, 1], "BYTES")
    s.set_data_from_numpy(S)
    result = client.infer("gd_scores", [x, s])
    y, upper = _expected(module, X, S.reshape(-1))
    np.testing.assert_allclose(result.as_numpy("scores"), y, rtol=1e-6)
    assert list(result.as_numpy("upper:0").reshape(-1)) == upper


@pytest.mark.skipif(bool(gpu_ids()), reason="Triton's default instance count is for a host without GPUs")
def test_auto_completed_config_has_tritons_instance_group(process):
    """A SavedModel without a config gets what Triton fills in on a host without GPUs: one
    CPU group named after the model with two instances (TensorFlow's default CPU count), and
    the SavedModel's file name."""
    import tritonclient.grpc as grpcclient

    config = grpcclient.InferenceServerClient(process.grpc_url).get_model_config("sm_auto").config
    groups = [(group.name, group.kind, group.count, list(group.gpus)) for group in config.instance_group]
    assert groups == [("sm_auto", config.instance_group[0].KIND_CPU, 2, [])]
    assert config.default_model_filename == "model.savedmodel"
