"""The example repository's ONNX models (examples/build_models.py + the committed configs)
load and answer correctly."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import onnx_models

from naiad import InferenceRequest, Tensor

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _build_models_module():
    spec = importlib.util.spec_from_file_location("build_models", EXAMPLES / "build_models.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_example_onnx_models_serve(tmp_path):
    build_models = _build_models_module()
    for name in build_models.MODELS:
        shutil.copytree(EXAMPLES / "models" / name, tmp_path / name, ignore=shutil.ignore_patterns("1"))
    build_models.build(tmp_path)
    a = np.arange(32, dtype=np.float32).reshape(2, 16)
    b = np.ones((2, 16), np.float32)

    async def body(server):
        add_sub = await server.infer(
            InferenceRequest("add_sub_onnx", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", b)])
        )
        classified = await server.infer(InferenceRequest("classifier_onnx", [Tensor.from_numpy("input", a)]))
        return add_sub, classified, server.model_config("classifier_onnx")

    add_sub, classified, config = onnx_models.serve(tmp_path, body)
    np.testing.assert_array_equal(add_sub.output("OUTPUT0").data, a + b)
    np.testing.assert_array_equal(add_sub.output("OUTPUT1").data, a - b)
    probabilities = classified.output("probabilities").data
    np.testing.assert_allclose(probabilities.sum(axis=1), np.ones(2), rtol=1e-5)
    assert config.outputs[0].labels is not None and len(config.outputs[0].labels) == 8
