"""TensorFlow sizes its pools from the machine's cores; under a CPU limit the backend sizes
the intra-op pool from the CPUs the server may use, unless a setting names a count."""

from __future__ import annotations

import pytest
from naiad_backend_tensorflow.backend import TensorFlowBackend

from naiad import BackendContext
from naiad.backend import abi


@pytest.fixture(autouse=True)
def machine_of_8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abi.os, "cpu_count", lambda: 8)


def intra_op_threads(cpu_count: int, **config: str) -> int:
    backend = TensorFlowBackend()
    backend.initialize(BackendContext("tensorflow", config, cpu_count=cpu_count))
    return backend.settings.intra_op_threads


def test_a_cpu_limit_sizes_the_intra_op_pool() -> None:
    assert intra_op_threads(2) == 2


def test_the_whole_machine_keeps_tensorflows_default() -> None:
    assert intra_op_threads(8) == 0


def test_a_setting_names_the_count() -> None:
    assert intra_op_threads(2, **{"intra-op-thread-count": "6"}) == 6
