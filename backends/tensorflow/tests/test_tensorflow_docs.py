"""docs/backends/tensorflow.md lists exactly the settings the backend reads."""

from __future__ import annotations

import re
from pathlib import Path

from naiad_backend_tensorflow.settings import BACKEND_CONFIG_KEYS, MODEL_PARAMETERS, parse_backend_settings

DOC = Path(__file__).resolve().parents[3] / "docs" / "backends" / "tensorflow.md"


def _table_keys(section: str) -> set[str]:
    text = DOC.read_text().split(section, 1)[1]
    table = text.split("\n\n", 2)[1]
    keys: set[str] = set()
    for line in table.splitlines()[2:]:
        keys.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return keys


def test_backend_config_keys_are_documented():
    assert _table_keys("`naiad serve --backend-config tensorflow,KEY=VALUE`:") == set(BACKEND_CONFIG_KEYS)


def test_model_parameters_are_documented():
    assert _table_keys("Per model, config `parameters` (Triton's names):") == set(MODEL_PARAMETERS)


def test_documented_backend_config_values_parse():
    settings = parse_backend_settings(
        {
            "intra-op-thread-count": "2",
            "inter-op-thread-count": "1",
            "allow-soft-placement": "false",
            "gpu-memory-fraction": "0.5",
            "default-max-batch-size": "16",
            "version": "2",
        }
    )
    assert (
        settings.intra_op_threads,
        settings.inter_op_threads,
        settings.allow_soft_placement,
        settings.gpu_memory_fraction,
        settings.default_max_batch_size,
    ) == (2, 1, False, 0.5, 16)
