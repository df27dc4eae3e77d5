"""Ensembles over real backends: Triton-style Python models (model.py with
triton_python_backend_utils, written as Triton's documentation writes them) and an ONNX
model built with onnx.helper at test time. Each test skips while its backend is not
installed, and also runs through tritonclient when the HTTP and gRPC frontends are."""

from __future__ import annotations

import asyncio
import importlib.util
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ensemble_repo import ensemble, model, step, tensor

from naiad import InferenceRequest, Server, ServerOptions, Tensor


def has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


needs_python = pytest.mark.skipif(not has("naiad_backend_python"), reason="naiad_backend_python is not installed")
needs_onnx = pytest.mark.skipif(not has("naiad_backend_onnx"), reason="naiad_backend_onnx is not installed")
needs_frontends = pytest.mark.skipif(
    not (has("naiad.frontends.http") and has("naiad.frontends.grpc")),
    reason="the HTTP and gRPC frontends are not installed",
)

NORMALIZE_PY = textwrap.dedent('''
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        """Pre-processing: NORMALIZED = (RAW - 2) / 4."""

        def initialize(self, args):
            self.model_config = model_config = json.loads(args["model_config"])
            output_config = pb_utils.get_output_config_by_name(model_config, "NORMALIZED")
            self.output_dtype = pb_utils.triton_string_to_numpy(output_config["data_type"])

        def execute(self, requests):
            responses = []
            for request in requests:
                raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
                normalized = pb_utils.Tensor("NORMALIZED", ((raw - 2.0) / 4.0).astype(self.output_dtype))
                responses.append(pb_utils.InferenceResponse(output_tensors=[normalized]))
            return responses

        def finalize(self):
            print("Cleaning up...")
''')

CLASSIFY_PY = textwrap.dedent('''
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        """Post-processing: softmax over LOGITS, and the index of the largest."""

        def initialize(self, args):
            self.model_config = model_config = json.loads(args["model_config"])
            probs_config = pb_utils.get_output_config_by_name(model_config, "PROBS")
            class_config = pb_utils.get_output_config_by_name(model_config, "CLASS")
            self.probs_dtype = pb_utils.triton_string_to_numpy(probs_config["data_type"])
            self.class_dtype = pb_utils.triton_string_to_numpy(class_config["data_type"])

        def execute(self, requests):
            responses = []
            for request in requests:
                logits = pb_utils.get_input_tensor_by_name(request, "LOGITS").as_numpy()
                shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
                probs = shifted / shifted.sum(axis=-1, keepdims=True)
                best = np.argmax(logits, axis=-1).reshape(-1, 1)
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("PROBS", probs.astype(self.probs_dtype)),
                    pb_utils.Tensor("CLASS", best.astype(self.class_dtype)),
                ]))
            return responses

        def finalize(self):
            print("Cleaning up...")
''')

W = np.array([[1.0, -1.0, 0.5], [0.0, 2.0, -0.5], [1.5, 0.0, 1.0], [-1.0, 0.5, 0.0]], np.float32)
BIAS = np.array([0.1, -0.2, 0.3], np.float32)
RAW = np.array([[0.0, 1.0, 2.0, 3.0], [4.0, -2.0, 6.0, 1.0]], np.float32)


def python_model(repo: Path, name: str, source: str, inputs: list[str], outputs: list[str]) -> None:
    model(
        repo,
        name,
        f'backend: "python"\nmax_batch_size: 8\ninput [ {", ".join(inputs)} ]\n'
        f"output [ {', '.join(outputs)} ]\ninstance_group [ {{ count: 1 kind: KIND_CPU }} ]\n",
    )
    (repo / name / "1" / "model.py").write_text(source)


def python_models(repo: Path) -> None:
    python_model(repo, "normalize", NORMALIZE_PY, [tensor("RAW")], [tensor("NORMALIZED")])
    python_model(
        repo,
        "classify",
        CLASSIFY_PY,
        [tensor("LOGITS", dims="[-1]")],
        [tensor("PROBS", dims="[-1]"), tensor("CLASS", "TYPE_INT32", "[1]")],
    )


def onnx_linear(repo: Path) -> None:
    """y = x @ W + b, with a dynamic batch dimension, built with onnx.helper."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(BIAS, "b")],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx_model.ir_version = 8
    model(
        repo,
        "linear",
        'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        f"input [ {tensor('x')} ]\noutput [ {tensor('y', dims='[3]')} ]\n",
    )
    onnx.save(onnx_model, str(repo / "linear" / "1" / "model.onnx"))


def two_step(repo: Path) -> None:
    python_models(repo)
    ensemble(
        repo,
        "two_step",
        [tensor("RAW")],
        [tensor("PROBS", dims="[-1]"), tensor("CLASS", "TYPE_INT32", "[1]")],
        [
            step("normalize", {"RAW": "RAW"}, {"NORMALIZED": "features"}),
            step("classify", {"LOGITS": "features"}, {"PROBS": "PROBS", "CLASS": "CLASS"}),
        ],
    )


def three_step(repo: Path) -> None:
    python_models(repo)
    onnx_linear(repo)
    ensemble(
        repo,
        "pipeline",
        [tensor("RAW")],
        [tensor("PROBS", dims="[-1]"), tensor("CLASS", "TYPE_INT32", "[1]"), tensor("LOGITS", dims="[3]")],
        [
            step("normalize", {"RAW": "RAW"}, {"NORMALIZED": "features"}),
            step("linear", {"x": "features"}, {"y": "LOGITS"}),
            step("classify", {"LOGITS": "LOGITS"}, {"PROBS": "PROBS", "CLASS": "CLASS"}),
        ],
    )


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def expected_two_step() -> dict[str, np.ndarray]:
    features = (RAW - 2.0) / 4.0
    return {"PROBS": softmax(features), "CLASS": np.argmax(features, -1).reshape(-1, 1).astype(np.int32)}


def expected_three_step() -> dict[str, np.ndarray]:
    logits = ((RAW - 2.0) / 4.0) @ W + BIAS
    return {"PROBS": softmax(logits), "CLASS": np.argmax(logits, -1).reshape(-1, 1).astype(np.int32), "LOGITS": logits}


def infer_in_process(repo: Path, name: str) -> tuple[dict[str, np.ndarray], list[dict]]:
    async def go():
        async with Server(ServerOptions([str(repo)])) as server:
            assert server.startup_failures == []
            response = await server.infer(InferenceRequest(name, [Tensor.from_numpy("RAW", RAW)]))
            return {t.name: t.data for t in response.outputs}, server.statistics()

    return asyncio.run(go())


def infer_with_tritonclient(repo: Path, name: str, outputs: list[str]) -> list[dict[str, np.ndarray]]:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    from naiad.testing import ServerProcess

    answers = []
    with ServerProcess(repo) as server:
        for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
            client = module.InferenceServerClient(url)
            assert client.is_model_ready(name)
            raw = module.InferInput("RAW", list(RAW.shape), "FP32")
            raw.set_data_from_numpy(RAW)
            result = client.infer(name, [raw], outputs=[module.InferRequestedOutput(o) for o in outputs])
            answers.append({o: result.as_numpy(o) for o in outputs})
    return answers


def check(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for name, value in want.items():
        if value.dtype == np.int32:
            np.testing.assert_array_equal(got[name], value)
        else:
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)


@needs_python
def test_two_step_ensemble_of_python_models(tmp_path):
    two_step(tmp_path)
    got, stats = infer_in_process(tmp_path, "two_step")
    check(got, expected_two_step())
    by_name = {s["name"]: s for s in stats}
    for name in ("two_step", "normalize", "classify"):
        assert by_name[name]["inference_stats"]["success"]["count"] == 1


@needs_python
@needs_frontends
def test_two_step_ensemble_of_python_models_through_tritonclient(tmp_path):
    two_step(tmp_path)
    for answer in infer_with_tritonclient(tmp_path, "two_step", ["PROBS", "CLASS"]):
        check(answer, expected_two_step())


@needs_python
@needs_onnx
def test_three_step_mixed_backend_pipeline(tmp_path):
    three_step(tmp_path)
    got, stats = infer_in_process(tmp_path, "pipeline")
    check(got, expected_three_step())
    by_name = {s["name"]: s for s in stats}
    for name in ("pipeline", "normalize", "linear", "classify"):
        assert by_name[name]["inference_stats"]["success"]["count"] == 1


@needs_python
@needs_onnx
@needs_frontends
def test_three_step_mixed_backend_pipeline_through_tritonclient(tmp_path):
    three_step(tmp_path)
    for answer in infer_with_tritonclient(tmp_path, "pipeline", ["PROBS", "CLASS", "LOGITS"]):
        check(answer, expected_three_step())
