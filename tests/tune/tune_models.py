"""The models tune's tests tune: the small CNN of the benchmarks (ONNX, dynamic batching), and
`doubler`, a Triton Python-backend model that refuses a max_batch_size above 8 at load (so a
candidate fails to load with the model's own message), served by naiad and by Triton alike."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from cnn_model import build_network, export_onnx, model_config  # noqa: E402

DOUBLER_PY = """import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if config["max_batch_size"] > 8:
            raise ValueError(f"this model takes batches of at most 8, not {config['max_batch_size']}")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (x * 2).astype(np.float32))]))
        return responses
"""

DOUBLER_CONFIG = """name: "doubler"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { }
"""


def write_doubler(repo: Path) -> Path:
    (repo / "doubler" / "1").mkdir(parents=True)
    (repo / "doubler" / "1" / "model.py").write_text(DOUBLER_PY)
    (repo / "doubler" / "config.pbtxt").write_text(DOUBLER_CONFIG)
    return repo


def write_cnn(repo: Path, name: str = "cnn") -> Path:
    """The CNN with the benchmark's default widths (about 0.3 ms an image in onnxruntime)."""
    (repo / name / "1").mkdir(parents=True)
    export_onnx(build_network([16, 48, 96, 192]), repo / name / "1" / "model.onnx")
    (repo / name / "config.pbtxt").write_text(model_config(name, 'platform: "onnxruntime_onnx"'))
    return repo
