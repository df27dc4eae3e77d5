"""The model repository the tests serve, written at test time."""

from __future__ import annotations

from pathlib import Path

# A Python model that answers the sum of its inputs and the process id of the naiad server
# that ran it (the Ray Serve replica: its model process's parent, or the parent of the stub
# template the model process was forked from), so a test sees which replica answered.
# `sleep_s` slows each execution down, to build a queue.
PID_MODEL = """
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils

def server_pid():
    parent = os.getppid()
    with open(f"/proc/{{parent}}/cmdline", "rb") as command:
        if b"stub_template" not in command.read():
            return parent
    with open(f"/proc/{{parent}}/stat") as stat:
        return int(stat.read().rpartition(")")[2].split()[1])

class TritonPythonModel:
    def execute(self, requests):
        time.sleep({sleep_s})
        replica = np.array([[server_pid()]], dtype=np.int64)
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            pid = np.repeat(replica, a.shape[0], axis=0)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", a + b), pb_utils.Tensor("PID", pid)]))
        return responses
"""

PID_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "PID" data_type: TYPE_INT64 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: {kind} }} ]
"""


def write_pid_model(repository: Path, name: str, sleep_s: float = 0.0, kind: str = "KIND_CPU") -> None:
    version = repository / name / "1"
    version.mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(PID_CONFIG.format(name=name, kind=kind))
    (version / "model.py").write_text(PID_MODEL.format(sleep_s=sleep_s))


IDENTITY_MODEL = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            request, "INPUT0").as_numpy())]) for request in requests]
"""

IDENTITY_CONFIG = """
name: "identity"
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def write_identity_model(repository: Path) -> None:
    """`identity`: answers its FP32 vector of any length unchanged."""
    version = repository / "identity" / "1"
    version.mkdir(parents=True)
    (repository / "identity" / "config.pbtxt").write_text(IDENTITY_CONFIG)
    (version / "model.py").write_text(IDENTITY_MODEL)
