"""The instance's `execute` with several requests at once (what a dynamic batcher hands
it): one stacked forward per compatible group, outputs split back per request, a request
the framework refuses fails alone; modules are shared by instances on one device."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
import torch_models
from naiad_backend_pytorch.backend import PyTorchBackend

from naiad import BackendContext, InferenceRequest, ModelContext, Tensor
from naiad.config import parse_config_text, validate_config
from naiad.testing import expand_instance_groups

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

CONFIG = """
backend: "pytorch" max_batch_size: 16
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 8 ] } ]
"""


def load(version: Path, filename: str):
    config = validate_config(parse_config_text(CONFIG, "m"), "m")
    backend = PyTorchBackend()
    backend.initialize(BackendContext("pytorch"))
    model = backend.create_model(ModelContext("m", 1, version.parent, version, config, filename))
    model.initialize()
    instances = []
    for context in expand_instance_groups(config, gpus=[]) * 2:
        instance = model.create_instance(context)
        instance.initialize()
        instances.append(instance)
    return model, instances


@pytest.mark.parametrize("kind", ["torchscript", "export"])
def test_batch_is_stacked_split_and_bad_requests_fail_alone(tmp_path, kind):
    version = tmp_path / "m" / "1"
    if kind == "torchscript":
        reference = torch_models.script(torch_models.MLP(), version / "model.pt")
        _, (instance, other) = load(version, "model.pt")
    else:
        program = torch_models.export(torch_models.MLP(), (torch.randn(2, 16),), version / "model.pt2")
        reference = program.module()
        _, (instance, other) = load(version, "model.pt")  # falls back to model.pt2
    assert other.loaded is instance.loaded
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((n, 16)).astype(np.float32) for n in (2, 1, 3)]
    requests = [InferenceRequest("m", [Tensor.from_numpy("INPUT__0", x)]) for x in xs]
    requests.insert(2, InferenceRequest("m", [Tensor.from_numpy("INPUT__0", np.ones((1, 7), np.float32))]))
    # On a thread of its own, as the server runs it (the ABI): an instance keeps torch's
    # thread-local modes set on the thread that executes it.
    with ThreadPoolExecutor(1) as instance_thread:
        responses = instance_thread.submit(instance.execute, requests).result()
    assert len(responses) == 4
    error = responses[2].error
    assert error is not None and "PyTorch failed on the inputs" in error.message
    for x, response in zip(xs, [responses[0], responses[1], responses[3]]):
        assert response.error is None
        with torch.inference_mode():
            expected = reference(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(response.output("OUTPUT__0").data, expected, rtol=1e-6)
