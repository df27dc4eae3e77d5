from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_servers import serve  # noqa: E402


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Where the logging models of the server write their executions."""
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="module")
def server(tmp_path_factory, logs):
    with serve(tmp_path_factory.mktemp("models"), logs) as process:
        yield process
