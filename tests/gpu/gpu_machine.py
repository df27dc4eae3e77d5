"""Whether this machine can run the GPU tests, and the marks every GPU test carries: `gpu`
(so `pytest -m gpu` selects them: scripts/gpu-check.sh on a lent GPU machine) and a skip
naming why where there is no usable GPU (CI, the development machines)."""

from __future__ import annotations

import functools

import pytest

__all__ = ["gpu_absent_reason", "NEEDS_GPU"]


@functools.cache
def gpu_absent_reason() -> str | None:
    """None when torch and cuda-bindings both see a CUDA device; else why not."""
    try:
        import torch
    except ImportError:
        return "no GPU test without torch"
    if not torch.cuda.is_available():
        return f"no GPU: torch {torch.__version__} sees no CUDA device"
    try:
        from cuda.bindings import runtime
    except ImportError:
        return "no GPU test without cuda-bindings (cuda-python), which CUDA shared memory uses"
    error, count = runtime.cudaGetDeviceCount()
    if error != runtime.cudaError_t.cudaSuccess or not count:
        return f"no GPU: cudaGetDeviceCount says {getattr(error, 'name', error)}"
    return None


NEEDS_GPU = [pytest.mark.gpu, pytest.mark.skipif(gpu_absent_reason() is not None, reason=str(gpu_absent_reason()))]
