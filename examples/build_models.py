#!/usr/bin/env python3
"""Writes the ONNX models of the example repository (examples/models/*/1/model.onnx).

The model files are generated, not committed; each model's config.pbtxt is committed beside
its directory. Run once before serving the examples:

    python examples/build_models.py            # needs the `onnx` package
    naiad serve --model-repository examples/models

* add_sub_onnx:    OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32, 16 wide).
* classifier_onnx: a small MLP (16 features -> 8 classes, softmax) with labels.txt, so the
                   classification extension has something to name.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# onnxruntime reads IR versions up to the one it was built for; 9 is read by every
# onnxruntime naiad-backend-onnx supports.
IR_VERSION = 9
OPSET = 17


def add_sub_model(width: int = 16) -> bytes:
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", width]) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", width]) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
        helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
    ]
    graph = helper.make_graph(nodes, "add_sub", inputs, outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    ).SerializeToString()


def mlp_classifier_model(features: int = 16, hidden: int = 64, classes: int = 8, seed: int = 0) -> bytes:
    """probabilities = softmax(relu(input @ W1 + b1) @ W2 + b2), fixed random weights."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    weights = {
        "W1": (rng.standard_normal((features, hidden)) / np.sqrt(features)).astype(np.float32),
        "B1": np.zeros(hidden, np.float32),
        "W2": (rng.standard_normal((hidden, classes)) / np.sqrt(hidden)).astype(np.float32),
        "B2": np.zeros(classes, np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["input", "W1", "B1"], ["hidden"]),
        helper.make_node("Relu", ["hidden"], ["activated"]),
        helper.make_node("Gemm", ["activated", "W2", "B2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "classifier",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", features])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", classes])],
        initializer=[numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    ).SerializeToString()


MODELS = {
    "add_sub_onnx": add_sub_model,
    "classifier_onnx": mlp_classifier_model,
}


def build(repository: Path) -> list[Path]:
    written = []
    for name, make in MODELS.items():
        path = repository / name / "1" / "model.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(make())
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, default=HERE / "models", help="default: examples/models")
    args = parser.parse_args()
    for path in build(args.repository):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
