"""tritonserver flags that naiad accepts but does not act on.

A launch line written for tritonserver must start naiad unchanged, so every flag
tritonserver 2.x takes is accepted. The ones below configure machinery naiad does not
have (native memory pools, shared-library directories, cloud-vendor listeners): each is
parsed with tritonserver's value type, and a line is logged once at start-up naming the
flag and why it has no effect here, so nothing is silently ignored.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from typing import Any, Final

from ..option_fields import option
from .flags import flag_dest, flag_fields

__all__ = ["INERT_FLAGS", "InertFlag", "InertFlags", "warn_inert_flags"]

_NO_EFFECT: Final = "no effect: "
_NO_POOLS: Final = "naiad hands numpy arrays to the frameworks, which allocate their own memory"
_NO_LIBRARIES: Final = "naiad finds backends as installed Python packages ('naiad.backends' entry points)"
_THREADS: Final = "naiad serves HTTP from an event loop; use --workers for more processes"
_NO_SAGEMAKER: Final = "naiad has no SageMaker endpoint"
_NO_VERTEX: Final = "naiad has no Vertex AI endpoint"
_NO_GPU_MEMORY: Final = "naiad does not measure GPU memory at load"


def _inert(flag: str, metavar: str, why: str) -> Any:
    # Its value type is the field's (tritonserver's): a malformed value is refused as
    # tritonserver refuses it. Unset is None (or no items).
    return option(None, flag, _NO_EFFECT + why, metavar=metavar, dest="inert_" + flag[2:].replace("-", "_"))


@dataclass(frozen=True, slots=True, kw_only=True)
class InertFlags:
    backend_directory: str | None = _inert("--backend-directory", "PATH", _NO_LIBRARIES)
    repoagent_directory: str | None = _inert("--repoagent-directory", "PATH", "naiad has no repository agents")
    cache_directory: str | None = _inert(
        "--cache-directory", "PATH", "naiad's response caches (local, redis) are built in, not libraries"
    )
    http_thread_count: int | None = _inert("--http-thread-count", "N", _THREADS)
    grpc_infer_allocation_pool_size: int | None = _inert(
        "--grpc-infer-allocation-pool-size", "N", "naiad keeps no pool of request objects"
    )
    buffer_manager_thread_count: int | None = _inert(
        "--buffer-manager-thread-count", "N", "naiad copies tensors on the thread that needs them"
    )
    pinned_memory_pool_byte_size: int | None = _inert("--pinned-memory-pool-byte-size", "BYTES", _NO_POOLS)
    cuda_memory_pool_byte_size: tuple[str, ...] | None = _inert(
        "--cuda-memory-pool-byte-size", "DEVICE:BYTES", _NO_POOLS
    )
    cuda_virtual_address_size: tuple[str, ...] | None = _inert(
        "--cuda-virtual-address-size", "DEVICE:BYTES", "naiad's implicit state lives in host memory"
    )
    min_supported_compute_capability: float | None = _inert(
        "--min-supported-compute-capability", "FLOAT", "naiad leaves GPU selection to the frameworks"
    )
    enable_peer_access: bool | None = _inert(
        "--enable-peer-access", "BOOL", "naiad leaves GPU peer access to the frameworks"
    )
    host_policy: tuple[str, ...] | None = _inert(
        "--host-policy", "NAME,KEY=VALUE", "naiad has no host policies (NUMA, CPU cores)"
    )
    model_load_gpu_limit: tuple[str, ...] | None = _inert("--model-load-gpu-limit", "DEVICE:FRACTION", _NO_GPU_MEMORY)
    model_namespacing: bool | None = _inert(
        "--model-namespacing", "BOOL", "naiad serves one namespace: a model name found twice fails to load"
    )
    allow_sagemaker: bool | None = _inert("--allow-sagemaker", "BOOL", _NO_SAGEMAKER)
    sagemaker_port: int | None = _inert("--sagemaker-port", "PORT", _NO_SAGEMAKER)
    sagemaker_safe_port_range: str | None = _inert("--sagemaker-safe-port-range", "LOW-HIGH", _NO_SAGEMAKER)
    sagemaker_thread_count: int | None = _inert("--sagemaker-thread-count", "N", _NO_SAGEMAKER)
    allow_vertex_ai: bool | None = _inert("--allow-vertex-ai", "BOOL", _NO_VERTEX)
    vertex_ai_port: int | None = _inert("--vertex-ai-port", "PORT", _NO_VERTEX)
    vertex_ai_thread_count: int | None = _inert("--vertex-ai-thread-count", "N", _NO_VERTEX)
    vertex_ai_default_model: str | None = _inert("--vertex-ai-default-model", "NAME", _NO_VERTEX)


# Flags whose false asks for nothing (`--allow-sagemaker false`): no warning for it.
_HARMLESS_WHEN_FALSE: Final = frozenset({"--model-namespacing", "--allow-sagemaker", "--allow-vertex-ai"})


@dataclass(frozen=True, slots=True)
class InertFlag:
    flag: str
    why: str
    dest: str


INERT_FLAGS: Final = tuple(
    InertFlag(f.metadata["flag"], f.metadata["help"].removeprefix(_NO_EFFECT), flag_dest(f))
    for f in flag_fields(InertFlags)
)


def warn_inert_flags(args: argparse.Namespace, log: logging.Logger) -> None:
    """Logs one warning per inert flag the command line set."""
    for spec in INERT_FLAGS:
        value = getattr(args, spec.dest, None)
        if value is None or value == [] or (value is False and spec.flag in _HARMLESS_WHEN_FALSE):
            continue
        log.warning("%s has no effect in naiad: %s", spec.flag, spec.why)
