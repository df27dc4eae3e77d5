"""The HTTP tests' model repository and server processes."""

from __future__ import annotations

import os
from pathlib import Path

from naiad.testing import ServerProcess

TESTS_DIR = Path(__file__).resolve().parents[1]


DATATYPES = [
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
    "BYTES",
]


def config_type(datatype: str) -> str:
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"


MODELS = {
    "add_sub": """backend: "numpy" max_batch_size: 8
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[4]},{name:"INPUT1" data_type: TYPE_FP32 dims:[4]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[4]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[4]}]
parameters {key:"op" value {string_value:"add_sub"}}""",
    # One optional input per datatype: INPUTi of DATATYPES[i] comes back as OUTPUTi.
    "types": 'backend: "numpy" max_batch_size: 0\n'
    + "input ["
    + ",".join(
        f'{{name:"INPUT{i}" data_type: {config_type(d)} dims:[-1, -1] optional: true}}' for i, d in enumerate(DATATYPES)
    )
    + "]\n"
    + "output ["
    + ",".join(f'{{name:"OUTPUT{i}" data_type: {config_type(d)} dims:[-1, -1]}}' for i, d in enumerate(DATATYPES))
    + "]",
    "classify": """backend: "numpy" max_batch_size: 4
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[5]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[5] label_filename: "labels.txt"}]""",
    "classify_int": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_INT32 dims:[2, 3]}]
output [{name:"OUTPUT0" data_type: TYPE_INT32 dims:[2, 3]}]""",
    "echo": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_INT32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[1]}]
parameters {key:"op" value {string_value:"echo_parameters"}}""",
    "identity": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]""",
    "failing": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]}]
parameters {key:"op" value {string_value:"fail"}}""",
}


def write_repository(root: Path, models: dict[str, str] = MODELS) -> Path:
    for name, config in models.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config)
    if "classify" in models:
        (root / "classify" / "labels.txt").write_text("cat\ndog\nbird\nfish\n")
    return root


def server_process(repository: Path, *flags: str) -> ServerProcess:
    """`naiad serve` (not yet started) with the numpy test backend and only HTTP."""
    python_path = os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return ServerProcess(
        repository,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-grpc",
        "false",
        "--allow-metrics",
        "false",
        *flags,
        env={"PYTHONPATH": python_path},
    )


def start_server(repository: Path, *flags: str) -> ServerProcess:
    return server_process(repository, *flags).start()
