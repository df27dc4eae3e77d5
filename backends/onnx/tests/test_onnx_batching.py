"""The instance's `execute` with several requests at once (what a dynamic batcher hands
it): one stacked onnxruntime call per compatible group, outputs split back per request,
and a request the framework refuses fails alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_models
import onnxruntime as ort
import pytest
from naiad_backend_onnx.backend import OnnxRuntimeBackend
from naiad_backend_onnx.settings import choose_providers

from naiad import BackendContext, ConfigError, InferenceRequest, ModelContext, RequestedOutput, Tensor
from naiad.config import parse_config_text, validate_config
from naiad.testing import expand_instance_groups


def load(tmp_path: Path, model: bytes, config_text: str):
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "model.onnx").write_bytes(model)
    config = validate_config(parse_config_text(config_text, "m"), "m")
    backend = OnnxRuntimeBackend()
    backend.initialize(BackendContext("onnxruntime"))
    context = ModelContext("m", 1, tmp_path / "m", version, config, "model.onnx")
    model_ = backend.create_model(context)
    model_.initialize()
    instance = model_.create_instance(expand_instance_groups(config, gpus=[])[0])
    instance.initialize()
    return model_, instance


VARIABLE_MLP = """
backend: "onnxruntime" max_batch_size: 16
input [ { name: "input" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 8 ] },
         { name: "logits" data_type: TYPE_FP32 dims: [ 8 ] } ]
"""


def test_batch_is_stacked_split_and_bad_requests_fail_alone(tmp_path):
    model_bytes = onnx_models.mlp()
    model, instance = load(tmp_path, model_bytes, VARIABLE_MLP)
    session = ort.InferenceSession(model_bytes)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((n, 16)).astype(np.float32) for n in (2, 1, 3)]
    requests = [InferenceRequest("m", [Tensor.from_numpy("input", x)]) for x in xs]
    requests[1].outputs = [RequestedOutput("logits")]
    # Width 7 passes the config (dims -1) but onnxruntime refuses it.
    requests.insert(1, InferenceRequest("m", [Tensor.from_numpy("input", np.ones((1, 7), np.float32))]))
    responses = instance.execute(requests)
    assert len(responses) == 4
    assert responses[1].error is not None and "Got: 7 Expected: 16" in responses[1].error.message
    for x, response in zip(xs, [responses[0], responses[2], responses[3]]):
        assert response.error is None
        expected = session.run(["logits"], {"input": x})[0]
        np.testing.assert_allclose(response.output("logits").data, expected, rtol=1e-6)
        assert response.output("logits").shape == (len(x), 8)
    # Every CPU instance of a model shares the one session.
    second = model.create_instance(expand_instance_groups(model.context.config, gpus=[])[0])
    second.initialize()
    assert second.session is instance.session


def test_cpu_instances_use_the_cpu_provider_only(tmp_path):
    config = validate_config(parse_config_text(VARIABLE_MLP, "m"), "m")
    assert choose_providers(config, "CPU", 0, ["CPUExecutionProvider"]) == [("CPUExecutionProvider", {})]


def test_cpu_openvino_accelerator_needs_its_provider():
    text = (
        VARIABLE_MLP + 'optimization { execution_accelerators { cpu_execution_accelerator [ { name: "openvino" } ] } }'
    )
    config = validate_config(parse_config_text(text, "m"), "m")
    assert choose_providers(config, "CPU", 0, ["OpenVINOExecutionProvider", "CPUExecutionProvider"]) == [
        ("OpenVINOExecutionProvider", {}),
        ("CPUExecutionProvider", {}),
    ]
    with pytest.raises(ConfigError) as info:
        choose_providers(config, "CPU", 0, ["CPUExecutionProvider"])
    assert "install onnxruntime-openvino" in info.value.message


def test_gpu_instances_order_tensorrt_cuda_cpu():
    text = (
        VARIABLE_MLP
        + """
optimization { execution_accelerators { gpu_execution_accelerator [
  { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } },
  { name: "cuda" parameters { key: "cudnn_conv_algo_search" value: "HEURISTIC" } } ] } }"""
    )
    config = validate_config(parse_config_text(text, "m"), "m")
    available = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    providers = choose_providers(config, "GPU", 1, available)
    assert [name for name, _ in providers] == available
    assert providers[0][1]["trt_fp16_enable"] == "True" and providers[0][1]["device_id"] == "1"
    assert providers[1][1] == {"device_id": "1", "cudnn_conv_algo_search": "HEURISTIC"}


def test_gpu_instance_without_cuda_provider_names_the_package():
    config = validate_config(parse_config_text(VARIABLE_MLP, "m"), "m")
    with pytest.raises(ConfigError) as info:
        choose_providers(config, "GPU", 0, ["CPUExecutionProvider"])
    assert "naiad-backend-onnx[gpu]" in info.value.message
    text = (
        VARIABLE_MLP + 'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "openvino" } ] } }'
    )
    with pytest.raises(ConfigError) as info:
        choose_providers(validate_config(parse_config_text(text, "m"), "m"), "GPU", 0, ["CUDAExecutionProvider"])
    assert "unknown accelerator 'openvino'" in info.value.message


@pytest.mark.filterwarnings("ignore:Specified provider:UserWarning")
def test_gpu_session_that_falls_back_to_cpu_is_refused(tmp_path, monkeypatch):
    # This onnxruntime has no CUDA provider; pretend it lists one, as a GPU build whose CUDA
    # libraries are missing does: ORT quietly falls back to the CPU, the backend must not.
    from naiad_backend_onnx import model as model_module

    model, _ = load(tmp_path, onnx_models.mlp(), VARIABLE_MLP)
    monkeypatch.setattr(
        model_module.ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    with pytest.raises(ConfigError) as info:
        model.session(model.context.config, "GPU", 0)
    assert "could not start CUDAExecutionProvider for GPU instances on GPU 0" in info.value.message
