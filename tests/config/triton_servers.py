"""`naiad serve` with the numpy test backend in explicit model-control mode, for the tests
that load Triton's QA configs one by one through tritonclient."""

from __future__ import annotations

import os
from pathlib import Path

from naiad.testing import ServerProcess

TESTS_DIR = Path(__file__).resolve().parents[1]


def explicit_server(repository: Path, *flags: str, grpc: bool = False) -> ServerProcess:
    """Not yet started; HTTP (and gRPC when asked), models loaded through the repository API."""
    python_path = os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return ServerProcess(
        repository,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--model-control-mode",
        "explicit",
        "--allow-grpc",
        str(grpc).lower(),
        "--allow-metrics",
        "false",
        *flags,
        env={"PYTHONPATH": python_path},
    )


def load_error(client, model: str) -> str:
    """The message of a load that must fail (an AssertionError when it loads)."""
    from tritonclient.utils import InferenceServerException

    try:
        client.load_model(model)
    except InferenceServerException as exc:
        return str(exc.message())
    raise AssertionError(f"model '{model}' loaded; it should have been refused")
