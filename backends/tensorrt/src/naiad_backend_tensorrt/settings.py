"""The TensorRT backend's process-wide settings, `--backend-config tensorrt,KEY=VALUE`."""

from __future__ import annotations

from dataclasses import dataclass

from naiad.backend.helpers import setting

__all__ = ["TensorRTBackendSettings"]


@dataclass(frozen=True, slots=True)
class TensorRTBackendSettings:
    # Triton's setting of the same name: libraries loaded before any engine is deserialized.
    plugins: str = setting("", "plugins", "TensorRT plugin libraries to load, separated by ';'")
