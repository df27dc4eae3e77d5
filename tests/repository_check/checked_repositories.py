"""Model repositories for `naiad check`'s tests, written at test time (ONNX models through
onnx.helper, Python models as text), and `naiad check` run through its real command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from onnx import TensorProto, helper

IR_VERSION = 9
OPSET = 17

PYTHON_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]))
        return responses
"""


def add_sub_onnx(width: int = 4, batch: Any = "batch") -> bytes:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, FP32 of shape [batch, width]."""
    dims = [batch, width]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
        helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
    ]
    graph = helper.make_graph(nodes, "add_sub", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    return model.SerializeToString()


def write_model(repository: Path, name: str, files: dict[str, str | bytes]) -> None:
    """`files`: paths inside the model's directory (`config.pbtxt`, `1/model.onnx`, `v1/`)
    to their contents; a path ending in / is an empty directory."""
    root = repository / name
    root.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        path = root / relative
        if relative.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def run_check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`naiad check ARGS` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "naiad.cli", "check", *args], capture_output=True, text=True, env=env, timeout=120
    )


def check_json(*args: str) -> tuple[int, dict[str, Any]]:
    """Exit status and JSON document of `naiad check --format json ARGS`."""
    done = run_check("--format", "json", *args)
    assert done.stderr == "", done.stderr
    return done.returncode, json.loads(done.stdout)
