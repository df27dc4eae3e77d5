from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_servers import models  # noqa: E402

from naiad.testing import ServerProcess  # noqa: E402

TESTS_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Where the logging models of the server write their executions."""
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="module")
def server(tmp_path_factory, logs):
    """naiad serve on HTTP and gRPC, client shared memory allowed, the numpy test backend."""
    repo = tmp_path_factory.mktemp("models")
    for name, config in models(logs).items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    python_path = os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH", "")) if p)
    process = ServerProcess(
        repo,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-metrics",
        "false",
        "--allow-client-shm",
        "true",
        env={"PYTHONPATH": python_path},
    )
    with process:
        yield process
