"""Per-model settings of the Python backend, read once at load from the model's config
`parameters` (with `--backend-config python,...` defaults), validated with messages that
name the model and the parameter."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from naiad.model_config import ConfigError, ModelConfig

__all__ = [
    "ModelSettings",
    "read_settings",
    "EXECUTION_MODE",
    "EXECUTE_TIMEOUT",
    "EXECUTION_ENV_PATH",
    "PROCESS",
    "IN_PROCESS",
]

# Config parameter keys.
EXECUTION_MODE = "execution_mode"
EXECUTE_TIMEOUT = "execute_timeout_seconds"
EXECUTION_ENV_PATH = "EXECUTION_ENV_PATH"
PROCESS = "process"
IN_PROCESS = "in_process"

# `--backend-config python,<key>=<value>` keys and their defaults.
_BACKEND_DEFAULTS = {
    "execution-mode": PROCESS,
    "execute-timeout-seconds": "0",
    "shm-default-byte-size": str(16 * 1024 * 1024),
    "stub-start-timeout-seconds": "120",
}


@dataclass(frozen=True, slots=True)
class ModelSettings:
    in_process: bool
    # 0: no limit.
    execute_timeout_s: float
    # The interpreter that runs the model's process.
    python: str
    # The environment directory named by EXECUTION_ENV_PATH, if any.
    env_dir: Path | None
    ring_bytes: int
    start_timeout_s: float


def read_settings(config: ModelConfig, model_dir: Path, backend_config: dict[str, str]) -> ModelSettings:
    name = config.name
    defaults = dict(_BACKEND_DEFAULTS)
    defaults.update(backend_config)

    mode = (config.parameter(EXECUTION_MODE) or defaults["execution-mode"]).strip().lower()
    if mode not in (PROCESS, IN_PROCESS):
        raise ConfigError(name, f"parameters.{EXECUTION_MODE}: must be '{PROCESS}' or '{IN_PROCESS}', got '{mode}'")

    timeout = _number(name, EXECUTE_TIMEOUT, config.parameter(EXECUTE_TIMEOUT) or defaults["execute-timeout-seconds"])
    ring = int(_number(name, "shm-default-byte-size", defaults["shm-default-byte-size"]))
    if ring < 4096:
        raise ConfigError(name, f"backend config shm-default-byte-size: must be at least 4096, got {ring}")
    start = _number(name, "stub-start-timeout-seconds", defaults["stub-start-timeout-seconds"])

    env_dir: Path | None = None
    python = sys.executable
    env_path = config.parameter(EXECUTION_ENV_PATH)
    if env_path:
        if mode == IN_PROCESS:
            raise ConfigError(name, f"parameters.{EXECUTION_ENV_PATH}: cannot be used with {EXECUTION_MODE} "
                              f"'{IN_PROCESS}' (the server's own interpreter runs the model)")
        # Triton's placeholder for the model's directory.
        env_path = env_path.replace("$$TRITON_MODEL_DIRECTORY", str(model_dir))
        env_dir = Path(env_path)
        if not env_dir.is_absolute():
            env_dir = model_dir / env_dir
        if not env_dir.is_dir():
            raise ConfigError(name, f"parameters.{EXECUTION_ENV_PATH}: '{env_dir}' is not a directory "
                              "(name a Python virtual environment or an unpacked conda environment)")
        python = _interpreter_in(env_dir)
        if not python:
            raise ConfigError(name, f"parameters.{EXECUTION_ENV_PATH}: '{env_dir}' has no bin/python3 or bin/python")
    return ModelSettings(mode == IN_PROCESS, timeout, python, env_dir, ring, start)


def _interpreter_in(env_dir: Path) -> str:
    for candidate in ("bin/python3", "bin/python"):
        path = env_dir / candidate
        if path.exists() and os.access(path, os.X_OK):
            return str(path)
    return ""


def _number(model: str, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(model, f"parameters.{key}: must be a number, got '{text}'") from None
    if value < 0:
        raise ConfigError(model, f"parameters.{key}: must not be negative, got {value}")
    return value
