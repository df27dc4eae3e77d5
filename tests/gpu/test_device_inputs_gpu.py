"""Inputs in CUDA shared memory reach a KIND_GPU PyTorch instance device to device, on a real
GPU: the instance views each request's bytes in the client's region and gathers the batch on
the GPU, in one process and with the model in the model home behind a front door (--workers 2).
A batch in which some request sent its input in the body is stacked on the host as before. The
rules on any machine: tests/gpu/test_cuda_placements.py."""

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from gpu_machine import NEEDS_GPU

from naiad.testing import ServerProcess

pytestmark = NEEDS_GPU
# No `from __future__ import annotations` here: TorchScript reads the annotations of Twice.
torch = pytest.importorskip("torch")

CONNECTIONS = 8
SIZE = 16 * 4  # one request: [1, 16] FP32


class Twice(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


CONFIG = """name: "twice"
platform: "pytorch_libtorch"
max_batch_size: 8
input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] }]
output [{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 16 ] }]
instance_group [{ kind: KIND_GPU gpus: [ 0 ] count: 1 }]
dynamic_batching { max_queue_delay_microseconds: 5000 }
"""


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-workers"])
def server(request, tmp_path_factory):
    repo: Path = tmp_path_factory.mktemp("device_inputs")
    (repo / "twice" / "1").mkdir(parents=True)
    torch.jit.script(Twice()).save(str(repo / "twice" / "1" / "model.pt"))  # type: ignore[no-untyped-call]
    (repo / "twice" / "config.pbtxt").write_text(CONFIG)
    with ServerProcess(repo, "--allow-client-shm=true", workers=request.param).start() as process:
        yield process


@pytest.fixture
def region(server):
    import tritonclient.utils.cuda_shared_memory as cudashm

    handle = cudashm.create_shared_memory_region("inputs", CONNECTIONS * SIZE, 0)
    httpclient.InferenceServerClient(server.http_url).register_cuda_shared_memory(
        "inputs", cudashm.get_raw_handle(handle), 0, CONNECTIONS * SIZE
    )
    yield cudashm, handle
    httpclient.InferenceServerClient(server.http_url).unregister_cuda_shared_memory()
    cudashm.destroy_shared_memory_region(handle)


def one(server, module, slot: int | None, x: np.ndarray) -> np.ndarray:
    """One request: its input in the region's `slot`, or in the body when `slot` is None."""
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    tensor = module.InferInput("INPUT__0", [1, 16], "FP32")
    if slot is None:
        tensor.set_data_from_numpy(x)
    else:
        tensor.set_shared_memory("inputs", SIZE, offset=slot * SIZE)
    return client.infer("twice", [tensor]).as_numpy("OUTPUT__0")


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_inputs_in_cuda_shared_memory_are_gathered_on_the_gpu(server, region, module):
    cudashm, handle = region
    xs = np.arange(CONNECTIONS * 16, dtype=np.float32).reshape(CONNECTIONS, 1, 16)
    cudashm.set_shared_memory_region(handle, [xs])
    for _ in range(3):  # batches of several requests, each from its own slot
        with ThreadPoolExecutor(CONNECTIONS) as pool:
            answers = list(pool.map(lambda slot: one(server, module, slot, xs[slot]), range(CONNECTIONS)))
        for slot, answer in enumerate(answers):
            assert answer.tolist() == (xs[slot] * 2).tolist()
    said = re.findall(
        r"model 'twice' instance '[^']+': inputs placed in CUDA shared memory on cuda:0 are read there", server.log()
    )
    assert said, server.log()[-3000:]


def test_a_batch_with_an_input_in_the_body_is_stacked_on_the_host(server, region):
    cudashm, handle = region
    xs = np.random.default_rng(0).standard_normal((CONNECTIONS, 1, 16)).astype(np.float32)
    cudashm.set_shared_memory_region(handle, [xs])
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        # Every other request sends its input in the body: batches mix both kinds.
        answers = list(
            pool.map(lambda slot: one(server, httpclient, slot if slot % 2 else None, xs[slot]), range(CONNECTIONS))
        )
    for slot, answer in enumerate(answers):
        np.testing.assert_array_equal(answer, xs[slot] * 2)


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_outputs_placed_in_cuda_shared_memory_are_written_there_on_the_gpu(server, region, module):
    cudashm, _ = region
    out = cudashm.create_shared_memory_region("outputs", CONNECTIONS * SIZE, 0)
    control = httpclient.InferenceServerClient(server.http_url)
    control.register_cuda_shared_memory("outputs", cudashm.get_raw_handle(out), 0, CONNECTIONS * SIZE)
    xs = np.random.default_rng(1).standard_normal((CONNECTIONS, 1, 16)).astype(np.float32)

    def infer(slot: int) -> np.ndarray:
        # Odd slots place the output in the region, even ones take it in the answer: batches mix both.
        client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
        tensor = module.InferInput("INPUT__0", [1, 16], "FP32")
        tensor.set_data_from_numpy(xs[slot])
        wanted = module.InferRequestedOutput("OUTPUT__0")
        if slot % 2:
            wanted.set_shared_memory("outputs", SIZE, offset=slot * SIZE)
        answer = client.infer("twice", [tensor], outputs=[wanted])
        if not slot % 2:
            return answer.as_numpy("OUTPUT__0")
        everything = cudashm.get_contents_as_numpy(out, np.float32, [CONNECTIONS, 1, 16])
        return everything[slot]

    try:
        for _ in range(3):
            with ThreadPoolExecutor(CONNECTIONS) as pool:
                answers = list(pool.map(infer, range(CONNECTIONS)))
            for slot, answer in enumerate(answers):
                np.testing.assert_array_equal(answer, xs[slot] * 2)
    finally:
        control.unregister_cuda_shared_memory("outputs")
        cudashm.destroy_shared_memory_region(out)
    said = re.findall(
        r"model 'twice' instance '[^']+': outputs placed in CUDA shared memory on cuda:0 are written there",
        server.log(),
    )
    assert said, server.log()[-3000:]


def test_a_region_made_again_is_read_and_written_afresh(server):
    """The instance keeps its tensors over clients' regions by address; a region unregistered,
    freed and made again (CUDA often hands the same address back) must be read and written as
    the new one, never through what was kept for the old."""
    import tritonclient.utils.cuda_shared_memory as cudashm

    control = httpclient.InferenceServerClient(server.http_url)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    for generation in range(3):
        region = cudashm.create_shared_memory_region("again", 2 * SIZE, 0)
        try:
            control.register_cuda_shared_memory("again", cudashm.get_raw_handle(region), 0, 2 * SIZE)
            x = np.full((1, 16), generation + 1, np.float32)
            cudashm.set_shared_memory_region(region, [x])
            tensor = grpcclient.InferInput("INPUT__0", [1, 16], "FP32")
            tensor.set_shared_memory("again", SIZE)
            wanted = grpcclient.InferRequestedOutput("OUTPUT__0")
            wanted.set_shared_memory("again", SIZE, offset=SIZE)
            client.infer("twice", [tensor], outputs=[wanted])
            written = cudashm.get_contents_as_numpy(region, np.float32, [2, 1, 16])[1]
            np.testing.assert_array_equal(written, x * 2)
        finally:
            control.unregister_cuda_shared_memory("again")
            cudashm.destroy_shared_memory_region(region)
