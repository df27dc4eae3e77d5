"""Builds model repositories for the ensemble tests: numpy-backend step models and
ensemble configs written as Triton users write them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from numpy_backend import NumpyPlugin

from naiad import Server, ServerOptions


def model(repo: Path, name: str, config: str, versions: tuple[int, ...] = (1,)) -> Path:
    """A model directory with `config.pbtxt` and empty numbered version directories."""
    for version in versions:
        (repo / name / str(version)).mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(config)
    return repo / name


def tensor(name: str, data_type: str = "TYPE_FP32", dims: str = "[4]") -> str:
    return f'{{ name: "{name}" data_type: {data_type} dims: {dims} }}'


def numpy_model(
    repo: Path,
    name: str,
    op: str,
    inputs: list[str],
    outputs: list[str],
    max_batch_size: int = 8,
    extra: str = "",
    **parameters: str,
) -> Path:
    """A numpy-backend model: `op` is one of tests/numpy_backend.py's operations."""
    params = {"op": op, **parameters}
    text = (
        f'backend: "numpy"\nmax_batch_size: {max_batch_size}\n'
        f"input [ {', '.join(inputs)} ]\noutput [ {', '.join(outputs)} ]\n"
        + "".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n' for k, v in params.items())
        + extra
    )
    return model(repo, name, text)


def add_sub(repo: Path, name: str = "add_sub", dims: str = "[4]", max_batch_size: int = 8, **kw: str) -> Path:
    return numpy_model(
        repo,
        name,
        "add_sub",
        [tensor("INPUT0", dims=dims), tensor("INPUT1", dims=dims)],
        [tensor("OUTPUT0", dims=dims), tensor("OUTPUT1", dims=dims)],
        max_batch_size,
        **kw,
    )


def unary(
    repo: Path,
    name: str,
    op: str = "identity",
    dims: str = "[4]",
    max_batch_size: int = 8,
    data_type: str = "TYPE_FP32",
    extra: str = "",
    **kw: str,
) -> Path:
    return numpy_model(
        repo,
        name,
        op,
        [tensor("INPUT0", data_type, dims)],
        [tensor("OUTPUT0", data_type, dims)],
        max_batch_size,
        extra,
        **kw,
    )


def step(model_name: str, inputs: dict[str, str], outputs: dict[str, str], version: int = -1) -> str:
    maps = "".join(f' input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    maps += "".join(f' output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model_name}" model_version: {version}{maps} }}'


def ensemble(
    repo: Path,
    name: str,
    inputs: list[str],
    outputs: list[str],
    steps: list[str],
    max_batch_size: int = 8,
    extra: str = "",
) -> Path:
    text = (
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {max_batch_size}\n'
        f"input [ {', '.join(inputs)} ]\noutput [ {', '.join(outputs)} ]\n"
        f"ensemble_scheduling {{ step [ {', '.join(steps)} ] }}\n{extra}"
    )
    return model(repo, name, text)


def serve(repo: Path, body: Callable[[Server], Awaitable[Any]], **options: Any) -> Any:
    """Run `body(server)` against an in-process server on `repo` with the numpy backend."""

    async def go() -> Any:
        opts = ServerOptions([str(repo)], backend_plugins=[NumpyPlugin()], **options)
        async with Server(opts) as server:
            return await body(server)

    return asyncio.run(go())
