"""Helpers for the gRPC tests: a repository of numpy-backend models written at test time, and
`naiad serve` processes that load the numpy test backend with --backend-plugin."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from numpy_backend import SEQUENCE_CONTROLS
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent

MODELS = {
    "add_sub": """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]
parameters {key:"op" value {string_value:"add_sub"}}""",
    "add_sub_wide": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]},{name:"INPUT1" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[-1]}]
parameters {key:"op" value {string_value:"add_sub"}}""",
    "identity": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]""",
    "identity_int": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_INT32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_INT32 dims:[-1]}]""",
    "identity_bytes": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_STRING dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[-1]}]""",
    "repeat": """backend: "numpy" max_batch_size: 0
model_transaction_policy { decoupled: true }
input [{name:"IN" data_type: TYPE_INT32 dims:[-1]}]
output [{name:"OUT" data_type: TYPE_INT32 dims:[1]},{name:"IDX" data_type: TYPE_UINT32 dims:[1]}]
parameters {key:"op" value {string_value:"repeat"}}""",
    "parameters": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[1]}]
parameters {key:"op" value {string_value:"echo_parameters"}}""",
    # Two instances and a per-request delay: a later request can finish before an earlier one.
    "delayed": """backend: "numpy" max_batch_size: 1
instance_group [{count: 2 kind: KIND_CPU}]
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]},{name:"DELAY_MS" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
parameters {key:"op" value {string_value:"sleep"}}""",
    # A sequence model (running sums by correlation id) with 2 x 4 slots, each execution slowed
    # so that requests queue behind one another.
    "accumulate": """backend: "numpy" max_batch_size: 4
instance_group [{count: 2 kind: KIND_CPU}]
input [{name:"INPUT" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}, {name:"CONTROLS" data_type: TYPE_INT32 dims:[3]},
        {name:"CORRID_OUT" data_type: TYPE_UINT64 dims:[1]}]
parameters [{key:"op" value {string_value:"accumulate"}}, {key:"sleep_ms" value {string_value:"2"}}]
sequence_batching { direct { } %s }"""
    % (SEQUENCE_CONTROLS % "TYPE_UINT64"),
    # One slot, one slow execution at a time: later requests of a sequence wait in its queue.
    "accumulate_slow": """backend: "numpy" max_batch_size: 1
input [{name:"INPUT" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}, {name:"CONTROLS" data_type: TYPE_INT32 dims:[3]},
        {name:"CORRID_OUT" data_type: TYPE_UINT64 dims:[1]}]
parameters [{key:"op" value {string_value:"accumulate"}}, {key:"sleep_ms" value {string_value:"1000"}}]
sequence_batching { direct { } %s }"""
    % (SEQUENCE_CONTROLS % "TYPE_UINT64"),
    "failing": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]
parameters {key:"op" value {string_value:"fail"}}""",
}


def write_repository(root: Path, names: list[str] | None = None) -> Path:
    for name in names or list(MODELS):
        (root / name / "1").mkdir(parents=True, exist_ok=True)
        (root / name / "config.pbtxt").write_text(MODELS[name])
    return root


def numpy_server(repo: Path, *flags: str) -> ServerProcess:
    """`naiad serve` with the numpy test backend; only gRPC (and what it needs) listens."""
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return ServerProcess(
        repo,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-http",
        "false",
        "--allow-metrics",
        "false",
        *flags,
        env={"PYTHONPATH": pythonpath},
    )


def expect_error(call, status: str, *fragments: str) -> str:
    """Run `call`, which must fail with gRPC `status` and a message holding every fragment;
    returns the message."""
    with pytest.raises(InferenceServerException) as info:
        call()
    assert info.value.status() == f"StatusCode.{status}", info.value
    for fragment in fragments:
        assert fragment in info.value.message(), info.value.message()
    return info.value.message()
