"""A Triton Python-backend model whose `initialize` is slow on the test's command: it writes
`started_file` when it begins, then waits (up to `wait_s`) for `gate_file` to exist. A test
sees from outside the server whether the load began, and decides when it ends."""

from __future__ import annotations

from pathlib import Path

MODEL_PY = """
import json
import time
from pathlib import Path

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        Path(parameters["started_file"]["string_value"]).write_text("initialize ran")
        gate = Path(parameters["gate_file"]["string_value"])
        deadline = time.monotonic() + float(parameters["wait_s"]["string_value"])
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests
        ]
"""


def write_slow_model(repo: Path, started: Path, gate: Path, wait_s: float = 60.0, name: str = "slow") -> None:
    """`name` in `repo`: identity on INPUT0 -> OUTPUT0 (FP32 [-1, 4], batching)."""
    version = repo / name / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(MODEL_PY)
    parameters = {"started_file": started, "gate_file": gate, "wait_s": wait_s}
    (repo / name / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 8\n'
        'input [{name: "INPUT0" data_type: TYPE_FP32 dims: [4]}]\n'
        'output [{name: "OUTPUT0" data_type: TYPE_FP32 dims: [4]}]\n'
        + "".join(f'parameters {{key: "{k}" value {{string_value: "{v}"}}}}\n' for k, v in parameters.items())
    )
