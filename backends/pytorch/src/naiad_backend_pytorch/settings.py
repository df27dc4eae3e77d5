"""The PyTorch backend's process-wide settings, `--backend-config pytorch,KEY=VALUE`."""

from __future__ import annotations

from dataclasses import dataclass

from naiad.backend.helpers import setting

__all__ = ["PyTorchBackendSettings"]


@dataclass(frozen=True, slots=True)
class PyTorchBackendSettings:
    default_max_batch_size: int = setting(
        4,
        "default-max-batch-size",
        "max_batch_size auto-complete gives exported programs whose inputs have a dynamic first dimension",
        minimum=0,
    )
