"""Triton's PyTorch execution parameters: TorchScript's process-wide JIT switches are set
before each execution of the model that names them and left alone by the others; a value
that is not true/false fails the load naming the parameter."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
import torch_models

from naiad import InferenceRequest, Tensor

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 8 ] } ]
"""


def parameters(**values: str) -> str:
    return "".join(
        f'\nparameters {{ key: "{key}" value {{ string_value: "{value}" }} }}' for key, value in values.items()
    )


def jit_switches() -> dict[str, bool]:
    """The three switches as torch has them now (reading two of them means setting them)."""
    profiling = torch._C._jit_set_profiling_mode(True)
    torch._C._jit_set_profiling_mode(profiling)
    executor = torch._C._jit_set_profiling_executor(True)
    torch._C._jit_set_profiling_executor(executor)
    return {"profiling": profiling, "executor": executor, "fuser": torch._C._jit_texpr_fuser_enabled()}


@pytest.fixture
def switches_on():
    before = jit_switches()
    for setter in (
        torch._C._jit_set_profiling_mode,
        torch._C._jit_set_profiling_executor,
        torch._C._jit_set_texpr_fuser_enabled,
    ):
        setter(True)
    yield
    torch._C._jit_set_profiling_mode(before["profiling"])
    torch._C._jit_set_profiling_executor(before["executor"])
    torch._C._jit_set_texpr_fuser_enabled(before["fuser"])


def test_jit_switches_are_set_by_the_model_that_names_them(tmp_path, switches_on):
    scripted = torch_models.script(torch_models.MLP(), tmp_path / "switched" / "1" / "model.pt")
    off = parameters(ENABLE_JIT_PROFILING="false", ENABLE_JIT_EXECUTOR="false", enable_tensor_fuser="false")
    torch_models.write_config(tmp_path, "switched", CONFIG + off)
    torch_models.script(torch_models.MLP(), tmp_path / "plain" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "plain", CONFIG)
    x = np.ones((2, 16), np.float32)
    seen = {}

    async def body(server):
        await server.infer(InferenceRequest("plain", [Tensor.from_numpy("INPUT__0", x)]))
        seen["after plain"] = jit_switches()
        response = await server.infer(InferenceRequest("switched", [Tensor.from_numpy("INPUT__0", x)]))
        seen["after switched"] = jit_switches()
        await server.infer(InferenceRequest("plain", [Tensor.from_numpy("INPUT__0", x)]))
        seen["after plain again"] = jit_switches()
        return response

    response = torch_models.serve(tmp_path, body)
    with torch.inference_mode():
        np.testing.assert_allclose(response.output("OUTPUT__0").data, scripted(torch.from_numpy(x)).numpy(), rtol=1e-6)
    assert seen["after plain"] == {"profiling": True, "executor": True, "fuser": True}
    assert seen["after switched"] == {"profiling": False, "executor": False, "fuser": False}
    # Process-wide, as in Triton: a model that does not name them leaves them as they are.
    assert seen["after plain again"] == seen["after switched"]


def test_execution_parameters_that_are_not_true_or_false_fail_the_load(tmp_path):
    for key in ("ENABLE_JIT_PROFILING", "DISABLE_CUDNN", "ENABLE_CACHE_CLEANING", "ENABLE_WEIGHT_SHARING"):
        name = key.lower()
        torch_models.script(torch_models.MLP(), tmp_path / name / "1" / "model.pt")
        torch_models.write_config(tmp_path, name, CONFIG + parameters(**{key: "sometimes"}))

    async def body(server):
        return {row["name"]: row for row in server.repository_index()}

    index = torch_models.serve(tmp_path, body)
    for key in ("ENABLE_JIT_PROFILING", "DISABLE_CUDNN", "ENABLE_CACHE_CLEANING", "ENABLE_WEIGHT_SHARING"):
        row = index[key.lower()]
        assert row["state"] == "UNAVAILABLE", row
        assert f"parameters.{key}: expected" in row["reason"] and "'sometimes'" in row["reason"], row


def test_nvfuser_is_ignored_with_a_warning_and_weight_sharing_is_accepted(tmp_path, caplog):
    torch_models.script(torch_models.MLP(), tmp_path / "fused" / "1" / "model.pt")
    extra = parameters(ENABLE_NVFUSER="true", ENABLE_WEIGHT_SHARING="true", ENABLE_CACHE_CLEANING="true")
    torch_models.write_config(tmp_path, "fused", CONFIG + extra)
    x = np.ones((1, 16), np.float32)

    async def body(server):
        return await server.infer(InferenceRequest("fused", [Tensor.from_numpy("INPUT__0", x)]))

    with caplog.at_level(logging.WARNING, logger="naiad.backends.pytorch"):
        response = torch_models.serve(tmp_path, body)
    assert response.output("OUTPUT__0").data.shape == (1, 8)
    assert any("model 'fused': ENABLE_NVFUSER is not supported" in r.getMessage() for r in caplog.records)


class GradModes(torch.nn.Module):
    """Answers, for each row, whether grad was enabled and whether its output is an inference tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2.0
        return torch.stack(
            [
                torch.full_like(x[:, 0], float(torch.is_grad_enabled())),
                torch.full_like(x[:, 0], float(y.is_inference())),
            ],
            dim=1,
        )


GRAD_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""


def test_each_model_runs_in_its_grad_mode_batch_after_batch_and_leaves_the_callers_thread_alone(tmp_path):
    # Set once on each instance's thread and kept: the second and third batches must still see it.
    torch_models.script(GradModes(), tmp_path / "inference" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "inference", GRAD_CONFIG)
    torch_models.script(GradModes(), tmp_path / "no_grad" / "1" / "model.pt")
    torch_models.write_config(tmp_path, "no_grad", GRAD_CONFIG + parameters(INFERENCE_MODE="false"))
    x = np.ones((1, 4), np.float32)
    seen: dict[str, list[list[float]]] = {"inference": [], "no_grad": []}
    loop_thread: dict[str, tuple[bool, bool]] = {}

    async def body(server):
        loop_thread["before"] = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
        for _ in range(3):
            for name, answers in seen.items():
                response = await server.infer(InferenceRequest(name, [Tensor.from_numpy("INPUT__0", x)]))
                answers.append(response.output("OUTPUT__0").data.reshape(-1).tolist())
        loop_thread["after"] = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())

    # Whatever an earlier test left on this thread: the loop starts with grad on, no inference mode.
    with torch.inference_mode(False), torch.enable_grad():
        torch_models.serve(tmp_path, body)
    assert seen["inference"] == [[0.0, 1.0]] * 3
    assert seen["no_grad"] == [[0.0, 0.0]] * 3
    assert loop_thread == {"before": (True, False), "after": (True, False)}
