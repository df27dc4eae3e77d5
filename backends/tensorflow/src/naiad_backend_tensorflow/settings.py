"""The TensorFlow backend's settings: `--backend-config tensorflow,KEY=VALUE` for the
process, and Triton's `TF_*` config parameters per model. Parsed and checked once, so a
bad value fails start-up or the load with a message naming the setting."""

from __future__ import annotations

from dataclasses import dataclass

from naiad.backend import ConfigError, ModelConfig, NaiadError

__all__ = [
    "BACKEND_CONFIG_KEYS",
    "MODEL_PARAMETERS",
    "BackendSettings",
    "ModelSettings",
    "parse_backend_settings",
    "parse_model_settings",
]

# Every key this backend reads (docs/backends/tensorflow.md lists the same; a test checks).
BACKEND_CONFIG_KEYS = (
    "intra-op-thread-count",
    "inter-op-thread-count",
    "allow-soft-placement",
    "gpu-memory-fraction",
    "default-max-batch-size",
    "version",
)
MODEL_PARAMETERS = (
    "TF_SIGNATURE_DEF",
    "TF_GRAPH_TAG",
    "TF_NUM_INTRA_THREADS",
    "TF_NUM_INTER_THREADS",
    "TF_USE_PER_SESSION_THREADS",
    "MAX_SESSION_SHARE_COUNT",
    "TF_INIT_OPS_FILE",
)

_TRUE = {"true", "on", "yes", "1"}
_FALSE = {"false", "off", "no", "0"}


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """Process-wide settings (`--backend-config tensorflow,...`).

    Thread counts of 0 let TensorFlow choose (one thread per core).
    """

    intra_op_threads: int = 0
    inter_op_threads: int = 0
    allow_soft_placement: bool = True
    gpu_memory_fraction: float = 0.0
    default_max_batch_size: int = 4


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


def _parse_bool(value: str, what: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{what}: expected true/false (or on/off, yes/no, 1/0), got '{value}'")


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
    settings = BackendSettings()
    values: dict[str, object] = {}
    try:
        if "version" in config and config["version"].strip() != "2":
            raise ValueError(f"version: only TensorFlow 2 is supported, got '{config['version']}'")
        if "intra-op-thread-count" in config:
            values["intra_op_threads"] = _parse_int(config["intra-op-thread-count"], "intra-op-thread-count", 0)
        if "inter-op-thread-count" in config:
            values["inter_op_threads"] = _parse_int(config["inter-op-thread-count"], "inter-op-thread-count", 0)
        if "allow-soft-placement" in config:
            values["allow_soft_placement"] = _parse_bool(config["allow-soft-placement"], "allow-soft-placement")
        if "gpu-memory-fraction" in config:
            raw = config["gpu-memory-fraction"]
            try:
                fraction = float(raw)
            except ValueError:
                raise ValueError(f"gpu-memory-fraction: expected a number between 0 and 1, got '{raw}'") from None
            if not 0.0 <= fraction <= 1.0:
                raise ValueError(f"gpu-memory-fraction: must be between 0 and 1, got {fraction}")
            values["gpu_memory_fraction"] = fraction
        if "default-max-batch-size" in config:
            values["default_max_batch_size"] = _parse_int(config["default-max-batch-size"], "default-max-batch-size", 0)
    except ValueError as exc:
        raise NaiadError.invalid(f"--backend-config tensorflow,{exc}") from None
    return BackendSettings(**{**_as_dict(settings), **values})


def _as_dict(settings: BackendSettings) -> dict[str, object]:
    return {name: getattr(settings, name) for name in BackendSettings.__slots__}


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
            per_session_threads = _parse_bool(per_session, "TF_USE_PER_SESSION_THREADS")
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
