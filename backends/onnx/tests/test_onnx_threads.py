"""onnxruntime sizes its intra-op pool from the machine's cores; under a CPU limit the backend
sizes it from the CPUs the server may use (`BackendContext.cpu_count`), unless a setting
names a count."""

from __future__ import annotations

import pytest
from naiad_backend_onnx.backend import OnnxRuntimeBackend

from naiad import BackendContext
from naiad.backend import abi


@pytest.fixture(autouse=True)
def machine_of_8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abi.os, "cpu_count", lambda: 8)


def backend(cpu_count: int, **config: str) -> OnnxRuntimeBackend:
    instance = OnnxRuntimeBackend()
    instance.initialize(BackendContext("onnxruntime", config, cpu_count=cpu_count))
    return instance


def test_a_cpu_limit_sizes_the_intra_op_pool() -> None:
    assert backend(2).settings.intra_op_threads == 2


def test_the_whole_machine_keeps_onnxruntimes_default() -> None:
    assert backend(8).settings.intra_op_threads == 0  # 0: ORT's own (one per physical core)


def test_a_setting_names_the_count() -> None:
    assert backend(2, intra_op_thread_count="5").settings.intra_op_threads == 5
