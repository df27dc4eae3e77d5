"""The Python backend's `--backend-config python,KEY=VALUE` settings are read by the one
settings parser every backend uses (naiad.backend.helpers): typed, bounded, and refused by key
and value, never taken as a silent default."""

from __future__ import annotations

from pathlib import Path

import pytest
from naiad_backend_python.server_side.settings import PythonBackendSettings, read_settings

from naiad.backend import ModelConfig
from naiad.backend.helpers import setting_keys
from naiad.config.model_config import parse_config_text, validate_config
from naiad.errors import NaiadError


def _config(parameters: str = "") -> ModelConfig:
    return validate_config(parse_config_text(f'name: "m" backend: "python" {parameters}', "m"), "m", None)


def test_the_keys_are_those_the_docs_name() -> None:
    assert setting_keys(PythonBackendSettings) == (
        "execution-mode",
        "execute-timeout-seconds",
        "shm-default-byte-size",
        "stub-start-timeout-seconds",
        "stub-start",
    )


def test_backend_config_sets_every_model_s_defaults_and_a_model_overrides_them(tmp_path: Path) -> None:
    backend = {"execution-mode": "IN_PROCESS", "execute-timeout-seconds": "2.5", "shm-default-byte-size": "65536"}
    settings = read_settings(_config(), tmp_path, backend)
    assert (settings.in_process, settings.execute_timeout_s, settings.ring_bytes) == (True, 2.5, 65536)
    own = _config('parameters { key: "execute_timeout_seconds" value { string_value: "7" } }')
    assert read_settings(own, tmp_path, backend).execute_timeout_s == 7.0


@pytest.mark.parametrize(
    ("key", "value", "fault"),
    [
        ("shm-default-byte-size", "4095", "must be at least 4096"),
        ("shm-default-byte-size", "lots", "expected an integer"),
        ("execute-timeout-seconds", "-1", "must be at least 0"),
        ("stub-start-timeout-seconds", "soon", "expected a number"),
        ("execution-mode", "remote", "expected one of process, in_process, inline"),
    ],
)
def test_a_bad_value_is_refused_naming_key_and_value(tmp_path: Path, key: str, value: str, fault: str) -> None:
    with pytest.raises(NaiadError) as caught:
        read_settings(_config(), tmp_path, {key: value})
    assert caught.value.message == f"--backend-config python,{key}: {fault}, got '{value}'"
