"""GPU tensors in a Triton `model.py` on a real GPU: `pb_utils.Tensor.from_dlpack` takes a torch
tensor, a DLPack capsule and a CuPy array that live on the GPU (copied to the host where they
cross into the server), inputs arrive in host memory whatever FORCE_CPU_ONLY_INPUT_TENSORS
says (`is_cpu()`), and `to_dlpack` feeds torch."""

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
            placed = [x.is_cpu(), doubled.is_cuda, all(t.is_cpu() for t in outputs)]
            outputs.append(pb_utils.Tensor("PLACES", np.array(placed, dtype=np.bool_)))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
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
