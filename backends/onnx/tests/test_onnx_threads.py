"""onnxruntime sizes its intra-op pool from the machine's cores; under a CPU limit the backend
sizes it from the CPUs the server may use (`BackendContext.cpu_count`), unless a setting
names a count. Its pool threads stop spinning when a run returns, unless a model says not to."""

from __future__ import annotations

import onnxruntime as ort
import pytest
from naiad_backend_onnx.backend import OnnxRuntimeBackend
from naiad_backend_onnx.settings import read_session_settings

from naiad import BackendContext
from naiad.backend import abi
from naiad.config import parse_config_text, validate_config


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


SPINNING_STOP = "session.force_spinning_stop"
CONFIG = """
backend: "onnxruntime" max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def session_options(config_text: str) -> ort.SessionOptions:
    config = validate_config(parse_config_text(config_text, "m"), "m")
    return read_session_settings(config, backend(8).settings).build()


def test_pool_threads_stop_spinning_when_a_run_returns_by_default() -> None:
    # Spinning idle threads would take the CPU the server's event loop needs.
    assert session_options(CONFIG).get_session_config_entry(SPINNING_STOP) == "1"


def test_a_models_own_session_entry_wins() -> None:
    spinning = CONFIG + f'parameters {{ key: "{SPINNING_STOP}" value {{ string_value: "0" }} }}'
    assert session_options(spinning).get_session_config_entry(SPINNING_STOP) == "0"
