"""Each instance thread runs torch's parallel operations with a pool of its own: the backend
shares the CPUs the server may use among a model's CPU instances, unless the config names a
count (INTRA_OP_THREAD_COUNT)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch_models
from naiad_backend_pytorch.backend import PyTorchBackend

from naiad import BackendContext, ModelContext
from naiad.backend import abi
from naiad.config import parse_config_text, validate_config

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")


@pytest.fixture(autouse=True)
def machine_of_8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(abi.os, "cpu_count", lambda: 8)


def intra_op_threads(tmp_path: Path, cpu_count: int, groups: str, parameters: str = "") -> int | None:
    version = tmp_path / "m" / "1"
    torch_models.script(torch_models.MLP(), version / "model.pt")
    text = f"""
    backend: "pytorch" max_batch_size: 16
    input [ {{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
    output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 8 ] }} ]
    instance_group [ {groups} ]
    {parameters}
    """
    config = validate_config(parse_config_text(text, "m"), "m")
    backend = PyTorchBackend()
    backend.initialize(BackendContext("pytorch", cpu_count=cpu_count))
    model = backend.create_model(ModelContext("m", 1, version.parent, version, config, "model.pt"))
    model.initialize()
    threads: int | None = model.intra_op_threads  # type: ignore[attr-defined]
    return threads


def test_cpu_instances_share_the_cpus(tmp_path: Path) -> None:
    assert intra_op_threads(tmp_path, 8, "{ count: 2 kind: KIND_CPU }") == 4
    assert intra_op_threads(tmp_path, 8, "{ count: 1 kind: KIND_CPU }, { count: 3 kind: KIND_CPU }") == 2


def test_one_instance_on_the_whole_machine_keeps_torchs_default(tmp_path: Path) -> None:
    assert intra_op_threads(tmp_path, 8, "{ count: 1 kind: KIND_CPU }") is None


def test_a_cpu_limit_sizes_one_instances_pool(tmp_path: Path) -> None:
    assert intra_op_threads(tmp_path, 2, "{ count: 1 kind: KIND_CPU }") == 2


def test_the_config_names_the_count(tmp_path: Path) -> None:
    parameters = 'parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "3" } }'
    assert intra_op_threads(tmp_path, 8, "{ count: 2 kind: KIND_CPU }", parameters) == 3
