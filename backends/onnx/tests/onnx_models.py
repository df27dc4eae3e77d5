"""Tiny ONNX models built at test time with onnx.helper, and helpers to lay out a model
repository and run a server on it in-process."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from naiad import Server, ServerOptions

# onnxruntime reads IR versions up to the one it was built for; 9 is read by every
# onnxruntime this backend supports.
IR_VERSION = 9
OPSET = 17


def _model(graph: Any) -> bytes:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    return model.SerializeToString()


def add_sub(elem_type: int = TensorProto.FLOAT, dims: tuple[Any, ...] = ("batch", 4)) -> bytes:
    """OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1."""
    inputs = [helper.make_tensor_value_info(n, elem_type, list(dims)) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, elem_type, list(dims)) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
        helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"]),
    ]
    return _model(helper.make_graph(nodes, "add_sub", inputs, outputs))


def mlp(features: int = 16, hidden: int = 32, classes: int = 8, seed: int = 0) -> bytes:
    """probabilities = softmax(relu(x @ W1 + b1) @ W2 + b2); also returns the logits."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((features, hidden)).astype(np.float32)
    b1 = rng.standard_normal(hidden).astype(np.float32)
    w2 = rng.standard_normal((hidden, classes)).astype(np.float32)
    b2 = rng.standard_normal(classes).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "W1"), (b1, "B1"), (w2, "W2"), (b2, "B2"))]
    nodes = [
        helper.make_node("Gemm", ["input", "W1", "B1"], ["hidden"]),
        helper.make_node("Relu", ["hidden"], ["activated"]),
        helper.make_node("Gemm", ["activated", "W2", "B2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", features])],
        [
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", classes]),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes]),
        ],
        initializer=inits,
    )
    return _model(graph)


def identity(elem_type: int, dims: tuple[Any, ...] = ("batch", 3)) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
        "identity",
        [helper.make_tensor_value_info("INPUT0", elem_type, list(dims))],
        [helper.make_tensor_value_info("OUTPUT0", elem_type, list(dims))],
    )
    return _model(graph)


def string_join() -> bytes:
    """OUTPUT0 = INPUT0 concatenated element-wise with "!" (a string-tensor op)."""
    bang = numpy_helper.from_array(np.array(["!"], dtype=object), "BANG")
    graph = helper.make_graph(
        [helper.make_node("StringConcat", ["INPUT0", "BANG"], ["OUTPUT0"])],
        "string_join",
        [helper.make_tensor_value_info("INPUT0", TensorProto.STRING, ["batch", 2])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.STRING, ["batch", 2])],
        initializer=[bang],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=IR_VERSION)
    return model.SerializeToString()


def write_model(repo: Path, name: str, model: bytes, config: str | None = None, filename: str = "model.onnx") -> Path:
    version = repo / name / "1"
    version.mkdir(parents=True, exist_ok=True)
    (version / filename).write_bytes(model)
    if config is not None:
        (repo / name / "config.pbtxt").write_text(config)
    return repo / name


def serve(repo: Path, body: Callable[[Server], Awaitable[Any]], **options: Any) -> Any:
    """Run `body(server)` against an in-process server on `repo` that loads only the ONNX
    backend (so the test does not depend on other backends being installed)."""
    from naiad_backend_onnx import plugin

    async def go() -> Any:
        server = Server(
            ServerOptions([str(repo)], backend_plugins=[plugin], load_backend_entry_points=False, **options)
        )
        await server.start()
        try:
            return await body(server)
        finally:
            await server.stop()

    return asyncio.run(go())
