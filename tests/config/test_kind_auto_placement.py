"""Where a group the config leaves to the server goes on a GPU machine: Triton puts KIND_AUTO
on the GPUs whatever the backend; naiad asks the backend (Backend.runs_on_gpus), so a
CPU-only framework build (onnxruntime from PyPI, torch+cpu) on a GPU machine serves on the
CPU instead of failing its load. An explicit KIND_GPU stays the config's choice."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from naiad.backend import Backend, Model
from naiad.models import config_completion
from naiad.models.config_completion import Written, auto_gpus, complete_config
from naiad.protos import model_config_pb2 as pb


class AnyDeviceBackend(Backend):
    name = "any_device"
    abi_version = (2, 2)


def completed(backend: Backend, text: str) -> pb.ModelConfig:
    from naiad.config.model_config import ModelConfig

    proto = text_format.Parse(text, pb.ModelConfig())
    config = ModelConfig(proto)
    complete_config(Model.__new__(Model), config, "", Written(frozenset(), "config.pbtxt"), False, auto_gpus(backend))
    return proto


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(config_completion, "gpu_ids", lambda: [0, 1])


def kinds(proto: pb.ModelConfig) -> list[tuple[str, list[int]]]:
    return [(pb.ModelInstanceGroup.Kind.Name(g.kind), list(g.gpus)) for g in proto.instance_group]


def test_a_backend_that_runs_on_gpus_gets_every_gpu(two_gpus):
    assert kinds(completed(AnyDeviceBackend(), 'name: "m"')) == [("KIND_GPU", [0, 1])]


@pytest.mark.parametrize(
    ("module", "backend_class"),
    [("naiad_backend_onnx.backend", "OnnxRuntimeBackend"), ("naiad_backend_pytorch.backend", "PyTorchBackend")],
)
def test_a_cpu_only_framework_build_gets_cpu_instances(two_gpus, module, backend_class):
    # The suite's onnxruntime and torch are CPU builds: neither has CUDA.
    backend = getattr(pytest.importorskip(module), backend_class)()
    assert backend.runs_on_gpus() is False
    proto = completed(backend, 'name: "m" instance_group [{ count: 2 }]')
    assert kinds(proto) == [("KIND_CPU", [])]
    assert proto.instance_group[0].count == 2


def test_an_explicit_gpu_group_stays_a_gpu_group(two_gpus):
    backend = pytest.importorskip("naiad_backend_onnx.backend").OnnxRuntimeBackend()
    proto = completed(backend, 'name: "m" instance_group [{ kind: KIND_GPU gpus: [1] }]')
    assert kinds(proto) == [("KIND_GPU", [1])]


def test_a_machine_without_gpus_does_not_ask_the_backend(monkeypatch):
    monkeypatch.setattr(config_completion, "gpu_ids", lambda: [])

    class Probing(AnyDeviceBackend):
        def runs_on_gpus(self) -> bool:
            raise AssertionError("a machine without GPUs asked the backend")

    assert kinds(completed(Probing(), 'name: "m"')) == [("KIND_CPU", [])]
