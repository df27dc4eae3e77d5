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

__all__ = [
    "ModelSettings",
    "read_settings",
    "EXECUTION_MODE",
    "EXECUTE_TIMEOUT",
    "EXECUTION_ENV_PATH",
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

# `--backend-config python,<key>=<value>` keys and their defaults.
_BACKEND_DEFAULTS = {
    "execution-mode": PROCESS,
    "execute-timeout-seconds": "0",
    "shm-default-byte-size": str(16 * 1024 * 1024),
    "stub-start-timeout-seconds": "120",
    "stub-start": FORK,
}


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

    @property
    def forks_stub(self) -> bool:
        """Whether the model's process comes from the stub template: only a process of the
        server's own interpreter can, since the template is one."""
        return (
            self.stub_start == FORK and not self.in_process and self.env_dir is None and self.python == sys.executable
        )


def read_settings(config: ModelConfig, model_dir: Path, backend_config: dict[str, str]) -> ModelSettings:
    name = config.name
    defaults = dict(_BACKEND_DEFAULTS)
    defaults.update(backend_config)

    mode = (config.parameter(EXECUTION_MODE) or defaults["execution-mode"]).strip().lower()
    if mode not in _MODES:
        choices = ", ".join(f"'{m}'" for m in _MODES)
        raise ConfigError(name, f"parameters.{EXECUTION_MODE}: must be one of {choices}, got '{mode}'")

    timeout = _number(name, EXECUTE_TIMEOUT, config.parameter(EXECUTE_TIMEOUT) or defaults["execute-timeout-seconds"])
    ring = int(_number(name, "shm-default-byte-size", defaults["shm-default-byte-size"]))
    if ring < 4096:
        raise ConfigError(name, f"backend config shm-default-byte-size: must be at least 4096, got {ring}")
    start = _number(name, "stub-start-timeout-seconds", defaults["stub-start-timeout-seconds"])
    stub_start = defaults["stub-start"].strip().lower()
    if stub_start not in _STUB_STARTS:
        choices = ", ".join(f"'{s}'" for s in _STUB_STARTS)
        raise ConfigError(name, f"backend config stub-start: must be one of {choices}, got '{stub_start}'")

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
    return ModelSettings(mode != PROCESS, mode == INLINE, timeout, python, env_dir, ring, start, stub_start)


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
