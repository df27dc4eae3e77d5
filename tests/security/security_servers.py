"""Helpers for the security tests: a repository of numpy-backend models written at test
time, `naiad serve` processes on it, and one tritonclient of each protocol."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent

MODELS = {
    "identity": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1, -1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1, -1]}]""",
    "identity_bytes": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_STRING dims:[-1, -1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[-1, -1]}]""",
}


def write_repository(root: Path, models: dict[str, str] = MODELS) -> Path:
    for name, config in models.items():
        (root / name / "1").mkdir(parents=True, exist_ok=True)
        (root / name / "config.pbtxt").write_text(config)
    return root


def numpy_server(repository: Path, *flags: str) -> ServerProcess:
    """`naiad serve` (started by `with`) with the numpy test backend, HTTP and gRPC."""
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return ServerProcess(
        repository,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-metrics",
        "false",
        *flags,
        env={"PYTHONPATH": pythonpath},
    )


def clients(server: ServerProcess) -> list[Any]:
    """One tritonclient per protocol, HTTP first."""
    return [httpclient.InferenceServerClient(server.http_url), grpcclient.InferenceServerClient(server.grpc_url)]


def client_module(client: Any) -> Any:
    return httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient


def expect_error(call: Callable[[], Any], *fragments: str) -> str:
    """Run `call`, which must fail with a message holding every fragment; returns it."""
    with pytest.raises(InferenceServerException) as info:
        call()
    message = info.value.message()
    for fragment in fragments:
        assert fragment in message, message
    return message
