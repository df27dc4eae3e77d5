"""The response-cache and warmup tests' models (numpy test backend, each logging its
executions to a file) and `naiad serve` processes with HTTP, gRPC and metrics."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent


def model_config(
    op: str,
    log: Path,
    *,
    max_batch_size: int = 0,
    dims: str = "[-1, -1]",
    cache: bool = True,
    extra: str = "",
    datatype: str = "TYPE_FP32",
    inputs: int = 1,
) -> str:
    """A numpy-backend model: INPUTi -> OUTPUTi by `op`, logging each execution to `log`."""
    return (
        f'backend: "numpy" max_batch_size: {max_batch_size}\n'
        + "input ["
        + ",".join(f'{{name:"INPUT{i}" data_type: {datatype} dims: {dims}}}' for i in range(inputs))
        + "]\noutput ["
        + ",".join(f'{{name:"OUTPUT{i}" data_type: {datatype} dims: {dims}}}' for i in range(inputs))
        + "]\n"
        f'parameters [{{key:"op" value {{string_value:"{op}"}}}}, '
        f'{{key:"execution_log" value {{string_value:"{log}"}}}}]\n'
        + ("response_cache { enable: true }\n" if cache else "")
        + extra
    )


def write_model(repo: Path, name: str, config: str) -> Path:
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config)
    return repo / name


def executions(log: Path) -> list[dict]:
    """Every execution a model logged: how many requests, and the first one's inputs."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def server(repo: Path, *flags: str, env: dict[str, str] | None = None) -> ServerProcess:
    """`naiad serve` (not started) with the numpy test backend on loopback ports."""
    python_path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    return ServerProcess(
        repo, "--backend-plugin", "numpy_backend:NumpyPlugin", *flags, env={"PYTHONPATH": python_path, **(env or {})}
    )


def client(process: ServerProcess, protocol: str):
    if protocol == "grpc":
        return grpcclient, grpcclient.InferenceServerClient(process.grpc_url)
    return httpclient, httpclient.InferenceServerClient(process.http_url)


def infer(
    process: ServerProcess,
    protocol: str,
    model: str,
    *arrays: np.ndarray,
    outputs: list[str] | None = None,
    parameters: dict | None = None,
) -> dict[str, np.ndarray]:
    """One request through tritonclient; the outputs by name."""
    module, connection = client(process, protocol)
    inputs = []
    for i, array in enumerate(arrays):
        datatype = "BYTES" if array.dtype == object else {"float32": "FP32", "int32": "INT32"}[str(array.dtype)]
        tensor = module.InferInput(f"INPUT{i}", list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    requested = [module.InferRequestedOutput(name) for name in outputs] if outputs else None
    result = connection.infer(model, inputs, outputs=requested, parameters=parameters)
    names = outputs or [f"OUTPUT{i}" for i in range(len(arrays))]
    return {name: result.as_numpy(name) for name in names}


def statistics(process: ServerProcess, model: str) -> dict:
    return httpclient.InferenceServerClient(process.http_url).get_inference_statistics(model)["model_stats"][0]
