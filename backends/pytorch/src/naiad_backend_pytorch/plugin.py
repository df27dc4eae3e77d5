"""The `naiad.backends` entry point: hands the server the PyTorch backend class."""

from __future__ import annotations

from naiad.backend import Backend, hookimpl

__all__ = ["naiad_backends"]


@hookimpl
def naiad_backends() -> list[type[Backend]]:
    # Imported here so discovering plugins never imports torch.
    from .backend import PyTorchBackend

    return [PyTorchBackend]
