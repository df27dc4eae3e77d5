"""The `naiad.backends` entry point: hands the server the ONNX Runtime backend class."""

from __future__ import annotations

from naiad.backend import Backend, hookimpl

__all__ = ["naiad_backends"]


@hookimpl
def naiad_backends() -> list[type[Backend]]:
    # Imported here so discovering plugins never imports onnxruntime.
    from .backend import OnnxRuntimeBackend

    return [OnnxRuntimeBackend]
