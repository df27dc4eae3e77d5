"""Which GPUs this machine has, found without importing any framework."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["gpu_ids"]


def gpu_ids() -> list[int]:
    """Ordinals of the NVIDIA GPUs visible to this process (honours CUDA_VISIBLE_DEVICES)."""
    proc = Path("/proc/driver/nvidia/gpus")
    count = len(list(proc.iterdir())) if proc.is_dir() else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [v for v in visible.split(",") if v.strip()]
        count = min(count, len(wanted))
    return list(range(count))
