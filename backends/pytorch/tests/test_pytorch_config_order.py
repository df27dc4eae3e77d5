"""Triton's PyTorch input binding through a real server and tritonclient: a TorchScript
model whose forward argument is named differently from the config's input, with a name
that does not follow `<name>__<index>` either, takes its inputs in config order."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch_models
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")


class Doubler(torch.nn.Module):
    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - the name is the point
        return input * 2


class Subtract(torch.nn.Module):
    def forward(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        return first - second


def test_inputs_named_neither_after_forward_nor_by_index_go_in_config_order(tmp_path: Path) -> None:
    torch_models.script(Doubler(), tmp_path / "doubler" / "1" / "model.pt")
    torch_models.write_config(
        tmp_path,
        "doubler",
        'platform: "pytorch_libtorch" max_batch_size: 0 '
        'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [3] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [3] }]',
    )
    torch_models.script(Subtract(), tmp_path / "subtract" / "1" / "model.pt")
    torch_models.write_config(
        tmp_path,
        "subtract",
        'platform: "pytorch_libtorch" max_batch_size: 0 '
        'input [{ name: "MINUEND" data_type: TYPE_FP32 dims: [2] }, { name: "SUBTRAHEND" data_type: TYPE_FP32 dims: [2] }] '
        'output [{ name: "DIFFERENCE" data_type: TYPE_FP32 dims: [2] }]',
    )
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    with ServerProcess(tmp_path, "--allow-grpc", "false", "--allow-metrics", "false", env=env) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_model_ready("doubler") and client.is_model_ready("subtract")

        data = np.array([1.0, 2.0, 3.5], dtype=np.float32)
        tensor = httpclient.InferInput("INPUT0", [3], "FP32")
        tensor.set_data_from_numpy(data)
        result = client.infer("doubler", [tensor])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data * 2)

        inputs = []
        for name, values in (("MINUEND", [10.0, 20.0]), ("SUBTRAHEND", [1.0, 2.0])):
            tensor = httpclient.InferInput(name, [2], "FP32")
            tensor.set_data_from_numpy(np.array(values, dtype=np.float32))
            inputs.append(tensor)
        result = client.infer("subtract", inputs)
        np.testing.assert_array_equal(result.as_numpy("DIFFERENCE"), [9.0, 18.0])
        assert "Falling back to enforcing strict ordering from model configuration" in server.log()
