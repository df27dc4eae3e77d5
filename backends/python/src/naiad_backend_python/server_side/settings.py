"""Per-model settings of the Python backend, read once at load from the model's config
`parameters` (with `--backend-config python,...` defaults), validated with messages that
name the model and the parameter."""

from __future__ import annotations

import hashlib
import os
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from naiad.backend import ConfigError, ModelConfig
from naiad.backend.helpers import read_settings as read_backend_settings
from naiad.backend.helpers import setting

__all__ = [
    "PythonBackendSettings",
    "ModelSettings",
    "read_settings",
    "EXECUTION_MODE",
    "EXECUTE_TIMEOUT",
    "EXECUTION_ENV_PATH",
    "FORCE_CPU_ONLY_INPUT_TENSORS",
    "PROCESS",
    "IN_PROCESS",
    "INLINE",
    "FORK",
    "SPAWN",
]

# Config parameter keys.
EXECUTION_MODE = "execution_mode"
EXECUTE_TIMEOUT = "execute_timeout_seconds"
EXECUTION_ENV_PATH = "EXECUTION_ENV_PATH"
# Triton's switch between inputs always in host memory ("yes", its default) and inputs where
# they are ("no"): with "no", an input a client placed in CUDA shared memory reaches a model
# running in its own process as a GPU tensor, read in place there.
FORCE_CPU_ONLY_INPUT_TENSORS = "FORCE_CPU_ONLY_INPUT_TENSORS"
PROCESS = "process"
IN_PROCESS = "in_process"
# In the server's process, and `execute` on the server's event loop thread (no thread hop).
INLINE = "inline"
_MODES = (PROCESS, IN_PROCESS, INLINE)
# How model processes start: forked from the stub template, sharing the interpreter and numpy
# (stub_forker.py), or each a fresh interpreter.
FORK = "fork"
SPAWN = "spawn"
_STUB_STARTS = (FORK, SPAWN)


@dataclass(frozen=True, slots=True)
class PythonBackendSettings:
    """`--backend-config python,KEY=VALUE`: defaults for every Python model of the server."""

    execution_mode: str = setting(
        PROCESS, "execution-mode", "where models run unless their config says", choices=_MODES
    )
    execute_timeout_s: float = setting(
        0.0, "execute-timeout-seconds", "longest execute before its requests fail; 0: no limit", minimum=0
    )
    ring_bytes: int = setting(
        16 * 1024 * 1024,
        "shm-default-byte-size",
        "bytes of each ring between the server and a model process",
        minimum=4096,
    )
    start_timeout_s: float = setting(
        120.0, "stub-start-timeout-seconds", "time a model process has to start and initialize", minimum=0
    )
    stub_start: str = setting(FORK, "stub-start", "how model processes start", choices=_STUB_STARTS)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    in_process: bool
    # in_process, with execute run on the server's event loop (execution_mode inline).
    inline: bool
    # 0: no limit.
    execute_timeout_s: float
    # The interpreter that runs the model's process.
    python: str
    # The environment directory named by EXECUTION_ENV_PATH, if any.
    env_dir: Path | None
    ring_bytes: int
    start_timeout_s: float
    # `fork` or `spawn` (backend config stub-start).
    stub_start: str = FORK
    # FORCE_CPU_ONLY_INPUT_TENSORS: False lets inputs in CUDA shared memory stay on the GPU.
    cpu_only_inputs: bool = True

    @property
    def forks_stub(self) -> bool:
        """Whether the model's process comes from the stub template: only a process of the
        server's own interpreter can, since the template is one."""
        return (
            self.stub_start == FORK and not self.in_process and self.env_dir is None and self.python == sys.executable
        )


def read_settings(config: ModelConfig, model_dir: Path, backend_config: dict[str, str]) -> ModelSettings:
    name = config.name
    defaults = read_backend_settings(PythonBackendSettings, "python", backend_config)

    cpu_only_inputs = config.bool_parameter(FORCE_CPU_ONLY_INPUT_TENSORS, True)
    mode = (config.parameter(EXECUTION_MODE) or defaults.execution_mode).strip().lower()
    if mode not in _MODES:
        choices = ", ".join(f"'{m}'" for m in _MODES)
        raise ConfigError(name, f"parameters.{EXECUTION_MODE}: must be one of {choices}, got '{mode}'")
    timeout_text = config.parameter(EXECUTE_TIMEOUT)
    timeout = _number(name, EXECUTE_TIMEOUT, timeout_text) if timeout_text else defaults.execute_timeout_s
    ring, start, stub_start = defaults.ring_bytes, defaults.start_timeout_s, defaults.stub_start

    env_dir: Path | None = None
    python = sys.executable
    env_path = config.parameter(EXECUTION_ENV_PATH)
    if env_path:
        if mode != PROCESS:
            raise ConfigError(
                name,
                f"parameters.{EXECUTION_ENV_PATH}: cannot be used with {EXECUTION_MODE} "
                f"'{mode}' (the server's own interpreter runs the model)",
            )
        # Triton's placeholder for the model's directory.
        env_path = env_path.replace("$$TRITON_MODEL_DIRECTORY", str(model_dir))
        env_dir = Path(env_path)
        if not env_dir.is_absolute():
            env_dir = model_dir / env_dir
        if env_dir.is_file() and env_dir.name.endswith(_ARCHIVE_SUFFIXES):
            env_dir = _unpacked(env_dir, name)
        if not env_dir.is_dir():
            raise ConfigError(
                name,
                f"parameters.{EXECUTION_ENV_PATH}: '{env_dir}' is neither a directory nor a "
                ".tar.gz archive (name a Python virtual environment or a conda environment)",
            )
        python = _interpreter_in(env_dir)
        if not python:
            raise ConfigError(name, f"parameters.{EXECUTION_ENV_PATH}: '{env_dir}' has no bin/python3 or bin/python")
    return ModelSettings(
        mode != PROCESS, mode == INLINE, timeout, python, env_dir, ring, start, stub_start, cpu_only_inputs
    )


_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")


def _unpacked(archive: Path, model: str) -> Path:
    """Unpack an environment archive (e.g. from conda-pack) once into a cache directory keyed
    by its path, size and modification time; later loads reuse it."""
    stat = archive.stat()
    key = hashlib.sha256(f"{archive.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:20]
    cache = Path(tempfile.gettempdir()) / "naiad-python-envs"
    target = cache / key
    if target.is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=cache))
    try:
        with tarfile.open(archive) as bundle:
            # "tar" keeps the archive's own symlinks (a venv's bin/python) but refuses paths
            # that escape the target directory.
            bundle.extractall(staging, filter="tar")
    except (tarfile.TarError, OSError) as exc:
        raise ConfigError(model, f"parameters.{EXECUTION_ENV_PATH}: cannot unpack '{archive}': {exc}") from None
    try:
        staging.rename(target)
    except OSError:
        pass  # another load unpacked it first
    return target if target.is_dir() else staging


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
