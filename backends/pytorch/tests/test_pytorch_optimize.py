"""TorchScript served through `torch.jit.optimize_for_inference` on the CPU (naiad's own
`OPTIMIZE_FOR_INFERENCE` parameter): the answers stay torch's, a model's state is kept, the
parameter turns it off, and a module torch cannot optimize is served as it was loaded."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch_models

from naiad import InferenceRequest, Tensor

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

CONV_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 16
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 12, 12 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""

COUNTER_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""

OFF = '\nparameters { key: "OPTIMIZE_FOR_INFERENCE" value { string_value: "false" } }\n'


class ConvBatchNorm(torch.nn.Module):
    """What optimize_for_inference rewrites: conv + batch norm folded, oneDNN convolutions."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.norm = torch.nn.BatchNorm2d(8)
        self.norm.running_mean.uniform_(-1, 1)
        self.norm.running_var.uniform_(0.5, 2)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm(self.conv(x)))
        return self.head(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Counter(torch.nn.Module):
    """Keeps state in a buffer that forward mutates: freezing must not fold it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add_(1.0)
        return x + self.seen


def infer(server, model: str, x: np.ndarray):
    return server.infer(InferenceRequest(model, [Tensor.from_numpy("INPUT__0", x)]))


@pytest.fixture
def optimize_calls(monkeypatch):
    """Counts torch.jit.optimize_for_inference calls, which still do their work."""
    calls: list[object] = []
    real = torch.jit.optimize_for_inference

    def recording(module, *args, **kwargs):
        calls.append(module)
        return real(module, *args, **kwargs)

    monkeypatch.setattr(torch.jit, "optimize_for_inference", recording)
    return calls


def test_cpu_torchscript_is_optimized_once_per_model_and_answers_as_torch_does(tmp_path, optimize_calls):
    scripted = torch_models.script(ConvBatchNorm(), tmp_path / "conv" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "conv", CONV_CONFIG)
    torch_models.script(ConvBatchNorm(), tmp_path / "plain" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "plain", CONV_CONFIG + OFF)
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((n, 3, 12, 12)).astype(np.float32) for n in (1, 5, 16)]

    async def body(server):
        return await asyncio.gather(*(infer(server, model, x) for model in ("conv", "plain") for x in batches))

    responses = torch_models.serve(tmp_path, body)
    # Two instances of "conv" share one optimized module; "plain" asked for none.
    assert len(optimize_calls) == 1
    for x, response in zip(batches + batches, responses):
        with torch.inference_mode():
            expected = scripted(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(response.output("OUTPUT__0").data, expected, rtol=1e-4, atol=1e-5)


def test_state_a_model_keeps_in_a_buffer_survives_optimization(tmp_path, optimize_calls):
    torch_models.script(Counter(), tmp_path / "counter" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "counter", COUNTER_CONFIG)

    async def body(server):
        return [await infer(server, "counter", np.zeros(1, np.float32)) for _ in range(3)]

    responses = torch_models.serve(tmp_path, body)
    assert len(optimize_calls) == 1
    assert [float(r.output("OUTPUT__0").data[0]) for r in responses] == [1.0, 2.0, 3.0]


def test_a_module_torch_cannot_optimize_is_served_as_loaded(tmp_path, monkeypatch, caplog):
    def refuse(module, *args, **kwargs):
        raise RuntimeError("traceback of the scripted code\nfreezing is not supported for this module")

    monkeypatch.setattr(torch.jit, "optimize_for_inference", refuse)
    scripted = torch_models.script(ConvBatchNorm(), tmp_path / "conv" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "conv", CONV_CONFIG)
    x = np.ones((2, 3, 12, 12), np.float32)

    async def body(server):
        return await infer(server, "conv", x)

    with caplog.at_level(logging.WARNING, logger="naiad.backends.pytorch"):
        response = torch_models.serve(tmp_path, body)
    with torch.inference_mode():
        np.testing.assert_allclose(response.output("OUTPUT__0").data, scripted(torch.from_numpy(x)).numpy(), rtol=1e-6)
    warnings = [r.getMessage() for r in caplog.records if "optimize_for_inference" in r.getMessage()]
    assert len(warnings) == 1, warnings  # tried once, not once per instance
    assert "model 'conv'" in warnings[0]
    assert "RuntimeError: freezing is not supported for this module" in warnings[0]
    assert "OPTIMIZE_FOR_INFERENCE" in warnings[0]


THREADS_AFTER_LOAD = """
import asyncio, os, sys
from naiad import Server, ServerOptions

async def main():
    server = Server(ServerOptions([sys.argv[1]]))
    await server.start()
    # The fewest over 3 s: threads on their way out (an ended thread's pool) are not counted.
    counts = []
    for _ in range(30):
        counts.append(len(os.listdir("/proc/self/task")))
        await asyncio.sleep(0.1)
    print(min(counts))
    await server.stop()

asyncio.run(main())
"""


@pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or len(os.sched_getaffinity(0)) < 2, reason="needs Linux, 2 CPUs"
)
def test_optimizing_leaves_no_openmp_pool_in_the_loading_thread(tmp_path):
    """An OpenMP pool left in the loading thread halves every instance's rate at small
    batches (libgomp stops spinning once more threads are pooled than there are CPUs): the
    optimization runs with one intra-op thread, so loading starts no more threads than
    loading without it."""
    counts = {}
    for optimize in ("true", "false"):
        repo = tmp_path / optimize
        torch_models.script(ConvBatchNorm(), repo / "conv" / "1" / "model.pt")
        parameter = f'\nparameters {{ key: "OPTIMIZE_FOR_INFERENCE" value {{ string_value: "{optimize}" }} }}\n'
        torch_models.write_config(repo, "conv", CONV_CONFIG.replace("count: 2", "count: 1") + parameter)
        result = subprocess.run(
            [sys.executable, "-c", THREADS_AFTER_LOAD, str(repo)], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        counts[optimize] = int(result.stdout.split()[-1])
    assert counts["true"] == counts["false"], counts
