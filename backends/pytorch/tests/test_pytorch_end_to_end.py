"""PyTorch models served by `naiad serve` and called through tritonclient over HTTP and
gRPC. Skipped when the frontends are not installed."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
import torch_models

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("naiad.frontends.http") is None
        or importlib.util.find_spec("naiad.frontends.grpc") is None,
        reason="naiad.frontends.http / naiad.frontends.grpc are not installed",
    ),
    pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning"),
]

MLP_CONFIG = """
platform: "pytorch_libtorch" max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 8 ] } ]
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from naiad.testing import ServerProcess

    repo = tmp_path_factory.mktemp("repo")
    scripted = torch_models.script(torch_models.MLP(), repo / "scripted" / "1" / "model.pt")
    torch_models.write_config(repo, "scripted", MLP_CONFIG)
    program = torch_models.export(torch_models.MLP(), (torch.randn(2, 16),), repo / "exported" / "1" / "model.pt2")
    with ServerProcess(repo) as server:
        yield server, scripted, program


def test_scripted_and_exported_mlp_over_http_and_grpc(served):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    server, scripted, program = served
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    with torch.inference_mode():
        expected = scripted(torch.from_numpy(x)).numpy()
        expected_exported = program.module()(torch.from_numpy(x)).numpy()
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        client = module.InferenceServerClient(url)
        for model, name, want in (("scripted", "INPUT__0", expected), ("exported", "x", expected_exported)):
            tensor = module.InferInput(name, list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            result = client.infer(model, [tensor])
            np.testing.assert_allclose(result.as_numpy("OUTPUT__0"), want, rtol=1e-6)
        metadata = client.get_model_metadata("exported")
        names = (
            [i["name"] for i in metadata["inputs"]] if isinstance(metadata, dict) else [i.name for i in metadata.inputs]
        )
        assert names == ["x"]
