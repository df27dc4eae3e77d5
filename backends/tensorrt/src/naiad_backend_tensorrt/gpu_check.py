"""Whether this process can run TensorRT engines at all, with a message that says what is
missing when it cannot."""

from __future__ import annotations

import os
from typing import Any

from naiad.backend import NaiadError
from naiad.backend.helpers import gpu_ids

from .cuda_runtime import gpu_count

__all__ = ["require_gpu", "require_tensorrt", "TENSORRT_MIN_VERSION"]

TENSORRT_MIN_VERSION = (8, 6)


def require_gpu(model: str) -> int:
    """The number of usable CUDA devices; UNAVAILABLE naming the missing GPU when none."""
    count, why = gpu_count()
    if count > 0:
        return count
    reasons = [why] if why else []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        reasons.append("CUDA_VISIBLE_DEVICES is empty")
    elif not gpu_ids():
        reasons.append("no NVIDIA GPU under /proc/driver/nvidia")
    raise NaiadError.unavailable(
        f"model '{model}': TensorRT plan models need an NVIDIA GPU, and this machine has none usable ("
        + "; ".join(reasons)
        + "). Serve the engine on a machine with a GPU of the compute capability it was built for, "
        "or serve the model's ONNX export with platform onnxruntime_onnx"
    )


def require_tensorrt(model: str) -> Any:
    """The `tensorrt` module; UNAVAILABLE naming the install command when it is missing
    or too old."""
    try:
        import tensorrt
    except ImportError as exc:
        raise NaiadError.unavailable(
            f"model '{model}': the TensorRT Python package is not installed ({exc}); install it with "
            "pip install 'naiad-backend-tensorrt[gpu]' (TensorRT's wheels come from pypi.nvidia.com)"
        ) from None
    version = tuple(int(p) for p in tensorrt.__version__.split(".")[:2] if p.isdigit())
    if version < TENSORRT_MIN_VERSION:
        raise NaiadError.unavailable(
            f"model '{model}': TensorRT {tensorrt.__version__} is too old; naiad needs "
            f"{TENSORRT_MIN_VERSION[0]}.{TENSORRT_MIN_VERSION[1]} or newer (named IO tensors)"
        )
    return tensorrt
