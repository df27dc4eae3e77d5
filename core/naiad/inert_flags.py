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
from collections.abc import Callable
from dataclasses import dataclass

from .flag_values import parse_bool

__all__ = ["INERT_FLAGS", "InertFlag", "add_inert_flags", "warn_inert_flags"]


@dataclass(frozen=True, slots=True)
class InertFlag:
    flag: str
    metavar: str
    why: str
    # tritonserver's value type; a malformed value is refused as tritonserver refuses it.
    parse: Callable[[str], object] = str
    repeatable: bool = False
    # A value that asks for nothing (e.g. `--allow-sagemaker false`): no warning for it.
    harmless: Callable[[object], bool] = lambda value: False

    @property
    def dest(self) -> str:
        return "inert_" + self.flag.removeprefix("--").replace("-", "_")


_NO_POOLS = "naiad hands numpy arrays to the frameworks, which allocate their own memory"
_NO_LIBRARIES = "naiad finds backends as installed Python packages ('naiad.backends' entry points)"
_THREADS = "naiad serves HTTP from an event loop; use --workers for more processes"

INERT_FLAGS: tuple[InertFlag, ...] = (
    InertFlag("--backend-directory", "PATH", _NO_LIBRARIES),
    InertFlag("--repoagent-directory", "PATH", "naiad has no repository agents"),
    InertFlag("--cache-directory", "PATH", "naiad's response caches (local, redis) are built in, not libraries"),
    InertFlag("--http-thread-count", "N", _THREADS, int),
    InertFlag("--grpc-infer-allocation-pool-size", "N", "naiad keeps no pool of request objects", int),
    InertFlag("--buffer-manager-thread-count", "N", "naiad copies tensors on the thread that needs them", int),
    InertFlag("--pinned-memory-pool-byte-size", "BYTES", _NO_POOLS, int),
    InertFlag("--cuda-memory-pool-byte-size", "DEVICE:BYTES", _NO_POOLS, repeatable=True),
    InertFlag(
        "--cuda-virtual-address-size", "DEVICE:BYTES", "naiad's implicit state lives in host memory", repeatable=True
    ),
    InertFlag("--min-supported-compute-capability", "FLOAT", "naiad leaves GPU selection to the frameworks", float),
    InertFlag("--enable-peer-access", "BOOL", "naiad leaves GPU peer access to the frameworks", parse_bool),
    InertFlag("--host-policy", "NAME,KEY=VALUE", "naiad has no host policies (NUMA, CPU cores)", repeatable=True),
    InertFlag(
        "--model-load-gpu-limit", "DEVICE:FRACTION", "naiad does not measure GPU memory at load", repeatable=True
    ),
    InertFlag(
        "--model-namespacing",
        "BOOL",
        "naiad serves one namespace: a model name found twice fails to load",
        parse_bool,
        harmless=lambda value: value is False,
    ),
    InertFlag(
        "--allow-sagemaker",
        "BOOL",
        "naiad has no SageMaker endpoint",
        parse_bool,
        harmless=lambda value: value is False,
    ),
    InertFlag("--sagemaker-port", "PORT", "naiad has no SageMaker endpoint", int),
    InertFlag("--sagemaker-safe-port-range", "LOW-HIGH", "naiad has no SageMaker endpoint"),
    InertFlag("--sagemaker-thread-count", "N", "naiad has no SageMaker endpoint", int),
    InertFlag(
        "--allow-vertex-ai",
        "BOOL",
        "naiad has no Vertex AI endpoint",
        parse_bool,
        harmless=lambda value: value is False,
    ),
    InertFlag("--vertex-ai-port", "PORT", "naiad has no Vertex AI endpoint", int),
    InertFlag("--vertex-ai-thread-count", "N", "naiad has no Vertex AI endpoint", int),
    InertFlag("--vertex-ai-default-model", "NAME", "naiad has no Vertex AI endpoint"),
)


def add_inert_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "accepted for tritonserver compatibility",
        "parsed as tritonserver parses them; each logs why it has no effect in naiad",
    )
    for spec in INERT_FLAGS:
        group.add_argument(
            spec.flag,
            dest=spec.dest,
            type=spec.parse,
            metavar=spec.metavar,
            default=None,
            action="append" if spec.repeatable else "store",
            help=f"no effect: {spec.why}",
        )


def warn_inert_flags(args: argparse.Namespace, log: logging.Logger) -> None:
    """Logs one warning per inert flag the command line set."""
    for spec in INERT_FLAGS:
        value = getattr(args, spec.dest, None)
        if value is None or (not spec.repeatable and spec.harmless(value)):
            continue
        log.warning("%s has no effect in naiad: %s", spec.flag, spec.why)
