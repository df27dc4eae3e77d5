"""The TensorFlow backend's settings: `--backend-config tensorflow,KEY=VALUE` for the
process, and Triton's `TF_*` config parameters per model. Parsed and checked once, so a
bad value fails start-up or the load with a message naming the setting."""

from __future__ import annotations

from dataclasses import dataclass

from naiad.backend import ConfigError, ModelConfig
from naiad.backend.helpers import read_bool, read_settings, setting, setting_keys

__all__ = [
    "BACKEND_CONFIG_KEYS",
    "MODEL_PARAMETERS",
    "BackendSettings",
    "ModelSettings",
    "parse_backend_settings",
    "parse_model_settings",
]


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """Process-wide settings (`--backend-config tensorflow,...`).

    Thread counts of 0 let TensorFlow choose (one thread per core).
    """

    intra_op_threads: int = setting(0, "intra-op-thread-count", "threads of one operator", minimum=0)
    inter_op_threads: int = setting(0, "inter-op-thread-count", "threads across operators", minimum=0)
    allow_soft_placement: bool = setting(True, "allow-soft-placement", "run an op on the CPU where the GPU has none")
    gpu_memory_fraction: float = setting(
        0.0, "gpu-memory-fraction", "share of GPU memory TensorFlow takes up front", minimum=0, maximum=1
    )
    default_max_batch_size: int = setting(
        4, "default-max-batch-size", "max_batch_size auto-complete gives batchable models", minimum=0
    )
    # Triton's backend takes 1 or 2; only TensorFlow 2 exists for naiad.
    version: str = setting("2", "version", "TensorFlow major version", choices=("2",))


# Every key this backend reads (docs/backends/tensorflow.md lists the same; a test checks).
BACKEND_CONFIG_KEYS = setting_keys(BackendSettings)
MODEL_PARAMETERS = (
    "TF_SIGNATURE_DEF",
    "TF_GRAPH_TAG",
    "TF_NUM_INTRA_THREADS",
    "TF_NUM_INTER_THREADS",
    "TF_USE_PER_SESSION_THREADS",
    "MAX_SESSION_SHARE_COUNT",
    "TF_INIT_OPS_FILE",
)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Per-model settings from the config's `parameters` (Triton's names)."""

    intra_op_threads: int
    inter_op_threads: int
    per_session_threads: bool
    graph_tag: str
    signature: str
    session_share_count: int
    init_ops_file: str


def _parse_int(value: str, what: str, minimum: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError(f"{what}: expected an integer, got '{value}'") from None
    if number < minimum:
        raise ValueError(f"{what}: must be at least {minimum}, got {number}")
    return number


def parse_backend_settings(config: dict[str, str]) -> BackendSettings:
    """Read `--backend-config tensorflow,...`; unknown keys are ignored (Triton passes
    global settings such as `backend-directory` to every backend)."""
    return read_settings(BackendSettings, "tensorflow", config)


def parse_model_settings(config: ModelConfig, backend: BackendSettings, model: str) -> ModelSettings:
    """Read Triton's `TF_*` parameters; a model that sets its own thread counts gets
    sessions with their own thread pools (TensorFlow sizes the shared pools once, from the
    first session, so a per-model count would otherwise be silently ignored). `model` is
    the model's name for messages (a config being auto-completed has none yet)."""

    def parameter(key: str) -> str | None:
        return config.parameter(key)

    try:
        intra = parameter("TF_NUM_INTRA_THREADS")
        inter = parameter("TF_NUM_INTER_THREADS")
        intra_threads = _parse_int(intra, "TF_NUM_INTRA_THREADS", 0) if intra else backend.intra_op_threads
        inter_threads = _parse_int(inter, "TF_NUM_INTER_THREADS", 0) if inter else backend.inter_op_threads
        per_session = parameter("TF_USE_PER_SESSION_THREADS")
        if per_session:
            per_session_threads = read_bool(per_session, "TF_USE_PER_SESSION_THREADS")
        else:
            per_session_threads = (intra_threads, inter_threads) != (
                backend.intra_op_threads,
                backend.inter_op_threads,
            )
        share = parameter("MAX_SESSION_SHARE_COUNT")
        share_count = _parse_int(share, "MAX_SESSION_SHARE_COUNT", 1) if share else 1
    except ValueError as exc:
        raise ConfigError(model, f"parameters: {exc}") from None
    return ModelSettings(
        intra_op_threads=intra_threads,
        inter_op_threads=inter_threads,
        per_session_threads=per_session_threads,
        graph_tag=(parameter("TF_GRAPH_TAG") or "").strip(),
        signature=(parameter("TF_SIGNATURE_DEF") or "").strip(),
        session_share_count=share_count,
        init_ops_file=(parameter("TF_INIT_OPS_FILE") or "").strip(),
    )
