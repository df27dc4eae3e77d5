"""On a machine with an NVIDIA GPU and TensorRT: build an engine from a small ONNX model
with the TensorRT builder, serve it, and compare with onnxruntime. Skips elsewhere."""

from __future__ import annotations

import asyncio
import importlib.util

import numpy as np
import pytest
from naiad_backend_tensorrt.cuda_runtime import compute_capability, gpu_count

from naiad import InferenceRequest, Server, ServerOptions, Tensor

pytestmark = [
    pytest.mark.skipif(gpu_count()[0] == 0, reason="no NVIDIA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("tensorrt") is None, reason="tensorrt is not installed"),
]

RNG = np.random.default_rng(7)
WEIGHT = RNG.standard_normal((4, 3)).astype(np.float32)
BIAS = RNG.standard_normal(3).astype(np.float32)


def onnx_model() -> bytes:
    """OUTPUT0 = relu(INPUT0 @ W + B), batch dimension dynamic."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["INPUT0", "W"], ["mm"]),
            helper.make_node("Add", ["mm", "B"], ["sum"]),
            helper.make_node("Relu", ["sum"], ["OUTPUT0"]),
        ],
        "dense",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(WEIGHT, "W"), numpy_helper.from_array(BIAS, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def build_engine(onnx_bytes: bytes) -> bytes:
    """Two optimization profiles: batch 1..8 and 9..32."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    if int(trt.__version__.split(".")[0]) < 10:
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(onnx_bytes), [parser.get_error(i) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    for low, opt, high in ((1, 4, 8), (9, 16, 32)):
        profile = builder.create_optimization_profile()
        profile.set_shape("INPUT0", (low, 4), (opt, 4), (high, 4))
        config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    assert plan is not None
    return bytes(plan)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    repo = tmp_path_factory.mktemp("trt_repo")
    onnx_bytes = onnx_model()
    plan = build_engine(onnx_bytes)
    (repo / "dense" / "1").mkdir(parents=True)
    (repo / "dense" / "1" / "model.plan").write_bytes(plan)
    major, minor = compute_capability(0)
    (repo / "dense_cc" / "1").mkdir(parents=True)
    (repo / "dense_cc" / "1" / "engine_this_gpu.plan").write_bytes(plan)
    (repo / "dense_cc" / "config.pbtxt").write_text(
        f'platform: "tensorrt_plan"\ncc_model_filenames {{ key: "{major}.{minor}" value: "engine_this_gpu.plan" }}\n'
        'cc_model_filenames { key: "1.0" value: "engine_for_another_gpu.plan" }\n'
    )
    return repo, onnx_bytes


def onnxruntime_result(onnx_bytes: bytes, x: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    return session.run(["OUTPUT0"], {"INPUT0": x})[0]


def test_engine_served_matches_onnxruntime(models):
    repo, onnx_bytes = models

    async def go():
        async with Server(ServerOptions([str(repo)])) as server:
            assert server.startup_failures == []
            config = server.model_config("dense")
            assert config.platform == "tensorrt_plan" and config.max_batch_size == 32
            assert [(s.name, s.datatype, s.dims) for s in config.inputs] == [("INPUT0", "FP32", (4,))]
            results = {}
            for model in ("dense", "dense_cc"):
                for batch in (3, 20):  # profile 0, then profile 1
                    x = RNG.standard_normal((batch, 4)).astype(np.float32)
                    response = await server.infer(InferenceRequest(model, [Tensor.from_numpy("INPUT0", x)]))
                    results[(model, batch)] = (x, response.output("OUTPUT0").data)
            return results

    for (model, batch), (x, got) in asyncio.run(go()).items():
        np.testing.assert_allclose(got, onnxruntime_result(onnx_bytes, x), rtol=1e-3, atol=1e-3)
        print(
            f"{model} batch {batch}: max abs diff vs onnxruntime {np.abs(got - onnxruntime_result(onnx_bytes, x)).max():.2e}"
        )
