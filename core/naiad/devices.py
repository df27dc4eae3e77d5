"""Which GPUs this machine has, found without importing any framework."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["gpu_ids"]

_DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")


def gpu_ids() -> list[int]:
    """Ordinals of the NVIDIA GPUs visible to this process (honours CUDA_VISIBLE_DEVICES)."""
    count = len(list(_DRIVER_GPUS.iterdir())) if _DRIVER_GPUS.is_dir() else _nvml_count()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [v for v in visible.split(",") if v.strip()]
        count = min(count, len(wanted))
    return list(range(count))


def _nvml_count() -> int:
    """The driver's own count, where the kernel module's /proc files are not there (some
    virtual machines and sandboxes expose the device without them); 0 without NVML
    (nvidia-ml-py) or without a driver."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return 0
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: no GPU
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001
        return 0
    finally:
        pynvml.nvmlShutdown()
