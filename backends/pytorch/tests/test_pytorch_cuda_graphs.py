"""Triton's `optimization { cuda { graphs: true } }` as the PyTorch backend reads it, on a machine
without a GPU: which batch sizes a config asks for, which inputs a graph cannot take, and that a
CPU instance serves such a config as before. Capturing and replaying on a GPU is
tests/gpu/test_cuda_graphs_gpu.py."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
import torch_models
from google.protobuf import text_format
from naiad_backend_pytorch.cuda_graphs import GraphPolicy, graph_blocker

from naiad import InferenceRequest, Tensor
from naiad.backend import ModelConfig
from naiad.backend.helpers import model_config_pb2 as pb

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

BASE = """
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 8 ] } ]
"""
GRAPHS = "optimization { cuda { graphs: true } }\n"


def config(text: str) -> ModelConfig:
    return ModelConfig(text_format.Parse(text, pb.ModelConfig()))


def test_graphs_are_off_unless_the_config_asks():
    assert not GraphPolicy.of(config(BASE)).enabled
    assert not GraphPolicy.of(config(BASE)).captures(1)


def test_graphs_true_captures_every_batch_size():
    policy = GraphPolicy.of(config(BASE + GRAPHS))
    assert policy.enabled and policy.batch_sizes is None
    assert all(policy.captures(n) for n in range(1, 9))


def test_graph_spec_names_the_batch_sizes_captured():
    text = BASE + "optimization { cuda { graphs: true graph_spec [ { batch_size: 1 }, { batch_size: 8 } ] } }\n"
    policy = GraphPolicy.of(config(text))
    assert policy.batch_sizes == {1, 8}
    assert [n for n in range(1, 9) if policy.captures(n)] == [1, 8]


@pytest.mark.parametrize(
    ("inputs", "reason"),
    [
        ('{ name: "A" data_type: TYPE_FP32 dims: [ 16 ] }', None),
        ('{ name: "A" data_type: TYPE_FP32 dims: [ -1, 4 ] }', "input 'A' has a variable dimension ([-1, 4])"),
        ('{ name: "A" data_type: TYPE_STRING dims: [ 1 ] }', "input 'A' is BYTES"),
        # forward receives the reshaped tensor: its reshape is what must be fixed.
        (
            '{ name: "A" data_type: TYPE_FP32 dims: [ 16 ] reshape { shape: [ 4, -1 ] } }',
            "variable dimension ([4, -1])",
        ),
    ],
)
def test_a_graph_needs_inputs_fixed_but_for_the_batch(inputs, reason):
    specs = config(f'platform: "pytorch_libtorch" max_batch_size: 4 input [ {inputs} ]').inputs
    blocker = graph_blocker(specs)
    if reason is None:
        assert blocker is None
    else:
        assert blocker is not None and reason in blocker


def test_a_cpu_instance_serves_a_config_that_asks_for_graphs_as_before(tmp_path):
    scripted = torch_models.script(torch_models.MLP(), tmp_path / "mlp" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "mlp", BASE + GRAPHS)
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)

    async def body(server):
        return await server.infer(InferenceRequest("mlp", [Tensor.from_numpy("INPUT__0", x)]))

    response = torch_models.serve(tmp_path, body)
    with torch.inference_mode():
        expected = scripted(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(response.output("OUTPUT__0").data, expected, rtol=1e-5, atol=1e-6)


def test_graphs_asked_for_a_model_with_variable_inputs_are_declined_with_a_warning(tmp_path, caplog):
    torch_models.script(torch_models.MLP(), tmp_path / "mlp" / "1" / "model.pt")
    variable = BASE.replace("dims: [ 16 ] }", "dims: [ -1 ] }", 1)
    torch_models.write_config(tmp_path, "mlp", variable + GRAPHS)
    x = np.ones((1, 16), np.float32)

    async def body(server):
        return await server.infer(InferenceRequest("mlp", [Tensor.from_numpy("INPUT__0", x)]))

    with caplog.at_level(logging.WARNING, logger="naiad.backends.pytorch"):
        response = torch_models.serve(tmp_path, body)
    assert response.output("OUTPUT__0").data.shape == (1, 8)
    warnings = [r.getMessage() for r in caplog.records if "CUDA graphs" in r.getMessage()]
    assert warnings == [
        "model 'mlp': optimization.cuda.graphs is set, but input 'INPUT__0' has a variable dimension ([-1]): "
        "served without CUDA graphs"
    ]
