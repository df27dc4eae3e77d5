"""The `naiad.backends` entry point: offers the TensorRT backend to the server."""

from __future__ import annotations

from naiad.backend import Backend, hookimpl

from .backend import TensorRTBackend


@hookimpl
def naiad_backends() -> list[type[Backend]]:
    return [TensorRTBackend]
