"""The pluggy plugin the `naiad.backends` entry point names."""

from __future__ import annotations

from naiad.backend import hookimpl

__all__ = ["naiad_backends"]


@hookimpl
def naiad_backends() -> list[type]:
    # Imported here so discovering plugins does no work until a python model loads.
    from .server_side.backend import PythonBackend

    return [PythonBackend]
