"""CUDA graphs for PyTorch KIND_GPU instances (Triton's `optimization { cuda { graphs: true } }`)
on a real GPU: each batch size is captured once and replayed with new inputs, answering as the
module does without graphs; `graph_spec` limits the sizes captured; a forward that cannot be
captured is served without graphs after one warning. The config's side, on any machine:
backends/pytorch/tests/test_pytorch_cuda_graphs.py."""

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from gpu_machine import NEEDS_GPU

from naiad.testing import ServerProcess

pytestmark = NEEDS_GPU
# No `from __future__ import annotations` here: TorchScript reads the annotations of Syncs.
torch = pytest.importorskip("torch")


def network() -> "torch.nn.Module":
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 10)
    ).eval()


class Syncs(torch.nn.Module):
    """Reads a value back to the host in forward, which no graph can capture."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            return x * 2
        return x * 3


def config(name: str, optimization: str, dims: int = 32, outputs: int = 10) -> str:
    return f"""name: "{name}"
platform: "pytorch_libtorch"
max_batch_size: 8
input [{{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ {dims} ] }}]
output [{{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ {outputs} ] }}]
instance_group [{{ kind: KIND_GPU gpus: [ 0 ] count: 2 }}]
optimization {{ cuda {{ {optimization} }} }}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("cuda_graphs")
    for name, module, text in (
        ("graphed", torch.jit.trace(network(), torch.zeros(1, 32)), config("graphed", "graphs: true")),
        (
            "only_two",
            torch.jit.trace(network(), torch.zeros(1, 32)),
            config("only_two", "graphs: true graph_spec [ { batch_size: 2 } ]"),
        ),
        ("syncs", torch.jit.script(Syncs()), config("syncs", "graphs: true", dims=4, outputs=4)),
    ):
        (repo / name / "1").mkdir(parents=True)
        module.save(str(repo / name / "1" / "model.pt"))
        (repo / name / "config.pbtxt").write_text(text)
    with ServerProcess(repo).start() as process:
        yield process


def infer(server: ServerProcess, model: str, x: np.ndarray, module=httpclient) -> np.ndarray:
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    tensor = module.InferInput("INPUT__0", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    return client.infer(model, [tensor]).as_numpy("OUTPUT__0")


def eager(x: np.ndarray) -> np.ndarray:
    with torch.inference_mode():
        return network().cuda()(torch.from_numpy(x).cuda()).cpu().numpy()


def captured(server: ServerProcess, model: str) -> list[int]:
    """The batch sizes the log says were captured for `model`, in order, every instance's."""
    pattern = rf"model '{model}' instance '[^']+': CUDA graph captured for batch size (\d+)"
    return [int(size) for size in re.findall(pattern, server.log())]


def test_each_batch_size_is_captured_once_and_replayed_with_new_inputs(server):
    rng = np.random.default_rng(0)
    for size in (1, 3, 8, 3, 1, 8):
        for module in (httpclient, grpcclient):
            x = rng.standard_normal((size, 32)).astype(np.float32)
            np.testing.assert_allclose(infer(server, "graphed", x, module), eager(x), rtol=1e-4, atol=1e-5)
    sizes = captured(server, "graphed")
    # Each instance captures a size the first time it runs it: at most once per instance.
    assert set(sizes) == {1, 3, 8} and all(sizes.count(size) <= 2 for size in sizes), sizes


def test_instances_replay_their_graphs_side_by_side(server):
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((int(rng.integers(1, 9)), 32)).astype(np.float32) for _ in range(64)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda x: infer(server, "graphed", x), inputs))
    for x, answer in zip(inputs, answers):
        np.testing.assert_allclose(answer, eager(x), rtol=1e-4, atol=1e-5)


def test_graph_spec_limits_the_batch_sizes_captured(server):
    rng = np.random.default_rng(2)
    for size in (1, 2, 3, 2):
        x = rng.standard_normal((size, 32)).astype(np.float32)
        np.testing.assert_allclose(infer(server, "only_two", x), eager(x), rtol=1e-4, atol=1e-5)
    assert set(captured(server, "only_two")) == {2}


def test_a_forward_that_cannot_be_captured_is_served_without_graphs(server):
    for sign, factor in ((1.0, 2.0), (-1.0, 3.0), (1.0, 2.0)):
        x = np.full((2, 4), sign, np.float32)
        assert infer(server, "syncs", x).tolist() == (x * factor).tolist()
    log = server.log()
    assert captured(server, "syncs") == []
    warnings = re.findall(r"model 'syncs' instance '[^']+' runs without CUDA graphs: capturing forward failed", log)
    assert 1 <= len(warnings) <= 2, log[-3000:]  # once per instance that ran a batch
