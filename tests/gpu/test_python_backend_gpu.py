"""GPU tensors in a Triton `model.py` on a real GPU: `pb_utils.Tensor.from_dlpack` takes a torch
tensor, a DLPack capsule and a CuPy array that live on the GPU and keeps them there (`is_cpu()`
false, as in Triton; copied to the host where a client reads them in the response), inputs sent
in the request's body arrive in host memory whatever FORCE_CPU_ONLY_INPUT_TENSORS says, and
`to_dlpack` feeds torch. With CUDA shared memory, the model's process reads inputs in the
client's region as GPU tensors (FORCE_CPU_ONLY_INPUT_TENSORS "no") and writes its GPU outputs
into the client's region, over HTTP and gRPC, in one process and with two workers. The same
rules on any machine: tests/gpu/test_python_cuda_regions.py."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from gpu_machine import NEEDS_GPU

from naiad.testing import ServerProcess

pytestmark = NEEDS_GPU

MODEL_PY = """
import cupy
import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack, to_dlpack


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            on_gpu = from_dlpack(x.to_dlpack()).to("cuda")
            doubled = on_gpu * 2
            outputs = [
                pb_utils.Tensor.from_dlpack("OUTPUT0", to_dlpack(doubled)),
                pb_utils.Tensor.from_dlpack("OUTPUT1", cupy.from_dlpack(on_gpu) + 1),
                pb_utils.Tensor.from_dlpack("OUTPUT2", doubled),
            ]
            placed = [x.is_cpu(), doubled.is_cuda, not any(t.is_cpu() for t in outputs)]
            outputs.append(pb_utils.Tensor("PLACES", np.array(placed, dtype=np.bool_)))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
"""

# Reads IN where it is (on the GPU when the client put it in CUDA shared memory and the config
# says FORCE_CPU_ONLY_INPUT_TENSORS "no"), and makes OUT on the GPU with torch.
REGIONS_MODEL_PY = """
import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN")
            seen = from_dlpack(x.to_dlpack())
            out = pb_utils.Tensor.from_dlpack("OUT", seen.to("cuda:0") * 2 + 1)
            facts = np.array([x.is_cpu(), seen.is_cuda, out.is_cpu()], dtype=np.bool_)
            responses.append(pb_utils.InferenceResponse([out, pb_utils.Tensor("FACTS", facts)]))
        return responses
"""

REGIONS_CONFIG = """name: "regions"
backend: "python"
max_batch_size: 0
input [{ name: "IN" data_type: TYPE_FP32 dims: [ 16 ] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "FACTS" data_type: TYPE_BOOL dims: [ 3 ] }]
instance_group [{ kind: KIND_GPU gpus: [ 0 ] count: 1 }]
parameters { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: { string_value: "no" } }
"""

CONFIG = """name: "gpu_tensors"
backend: "python"
max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "OUTPUT2" data_type: TYPE_FP32 dims: [ -1 ] },
  { name: "PLACES" data_type: TYPE_BOOL dims: [ 3 ] }
]
parameters { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: { string_value: "%s" } }
"""


@pytest.fixture(scope="module", params=["yes", "no"])
def server(request, tmp_path_factory):
    repo = tmp_path_factory.mktemp("python_gpu")
    (repo / "gpu_tensors" / "1").mkdir(parents=True)
    (repo / "gpu_tensors" / "1" / "model.py").write_text(MODEL_PY)
    (repo / "gpu_tensors" / "config.pbtxt").write_text(CONFIG % request.param)
    with ServerProcess(repo).start() as process:
        yield process


@pytest.mark.parametrize("module", [httpclient, grpcclient])
def test_gpu_tensors_come_back_from_a_model_py(server, module):
    client = module.InferenceServerClient(server.http_url if module is httpclient else server.grpc_url)
    x = np.array([1.0, 2.5, -3.0], dtype=np.float32)
    tensor = module.InferInput("INPUT0", [3], "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("gpu_tensors", [tensor])
    assert result.as_numpy("OUTPUT0").tolist() == [2.0, 5.0, -6.0]
    assert result.as_numpy("OUTPUT1").tolist() == [2.0, 3.5, -2.0]
    assert result.as_numpy("OUTPUT2").tolist() == [2.0, 5.0, -6.0]
    assert result.as_numpy("PLACES").tolist() == [True, True, True]


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-workers"])
def regions_server(request, tmp_path_factory):
    repo = tmp_path_factory.mktemp("python_regions")
    (repo / "regions" / "1").mkdir(parents=True)
    (repo / "regions" / "1" / "model.py").write_text(REGIONS_MODEL_PY)
    (repo / "regions" / "config.pbtxt").write_text(REGIONS_CONFIG)
    with ServerProcess(repo, "--allow-client-shm=true", workers=request.param).start() as process:
        yield process


@pytest.mark.parametrize("module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_a_model_py_reads_and_writes_cuda_shared_memory_on_the_gpu(regions_server, module):
    import tritonclient.utils.cuda_shared_memory as cudashm

    url = regions_server.http_url if module is httpclient else regions_server.grpc_url
    client = module.InferenceServerClient(url)
    region = cudashm.create_shared_memory_region("py_io", 128, 0)
    try:
        client.register_cuda_shared_memory("py_io", cudashm.get_raw_handle(region), 0, 128)
        x = np.linspace(-4, 4, 16, dtype=np.float32)
        cudashm.set_shared_memory_region(region, [x])
        tensor = module.InferInput("IN", [16], "FP32")
        tensor.set_shared_memory("py_io", 64)
        out = module.InferRequestedOutput("OUT")
        out.set_shared_memory("py_io", 64, offset=64)
        for _ in range(3):  # the model's process opens the region once and keeps it open
            result = client.infer("regions", [tensor], outputs=[out, module.InferRequestedOutput("FACTS")])
            # IN reached the model on the GPU, OUT stayed there and is in the region.
            assert result.as_numpy("FACTS").tolist() == [False, True, False]
            written = cudashm.get_contents_as_numpy(region, np.float32, [32])[16:]
            np.testing.assert_array_equal(written, x * 2 + 1)
    finally:
        client.unregister_cuda_shared_memory("py_io")
        cudashm.destroy_shared_memory_region(region)
    # Written by the model's process, not copied through the host by the server.
    assert "are written there by the model's process, device to device" in regions_server.log()


# Answers the OpenMP wait policy its process was started with.
WAIT_POLICY_MODEL_PY = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        seen = os.environ.get("OMP_WAIT_POLICY", "").encode()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array([seen], dtype=object))]) for _ in requests]
"""

WAIT_POLICY_CONFIG = """name: "wait_policy"
backend: "python"
max_batch_size: 0
input [{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }]
output [{ name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }]
instance_group [{ kind: KIND_GPU gpus: [ 0 ] count: 1 }]
"""


def test_a_gpu_instances_process_starts_with_passive_openmp_threads(tmp_path):
    (tmp_path / "wait_policy" / "1").mkdir(parents=True)
    (tmp_path / "wait_policy" / "1" / "model.py").write_text(WAIT_POLICY_MODEL_PY)
    (tmp_path / "wait_policy" / "config.pbtxt").write_text(WAIT_POLICY_CONFIG)
    with ServerProcess(tmp_path) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        x = httpclient.InferInput("X", [1], "FP32")
        x.set_data_from_numpy(np.ones(1, np.float32))
        assert client.infer("wait_policy", [x]).as_numpy("SEEN").tolist() == [b"PASSIVE"]
