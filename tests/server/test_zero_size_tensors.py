"""Tensors with no elements ([1, 0], [0, 3]) round-trip through identity models of the
Python and ONNX backends (and the numpy test backend) over HTTP JSON, HTTP binary and gRPC,
as they do in Triton. Each backend's case skips while that backend is not installed."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parents[1]
SHAPES = [[1, 0], [0, 3]]
IO = """input [{{name:"INPUT0" data_type: {t} dims:[-1, -1]}}]
output [{{name:"OUTPUT0" data_type: {t} dims:[-1, -1]}}]"""
PYTHON_IDENTITY = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy())]) for request in requests]
"""


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _model(repo: Path, name: str, config: str) -> Path:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(config)
    return repo / name / "1"


def _onnx_identity(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
        "identity",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["a", "b"])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["a", "b"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path / "model.onnx"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    repo = tmp_path_factory.mktemp("zero-size")
    for datatype, config_type in (("FP32", "TYPE_FP32"), ("BYTES", "TYPE_STRING")):
        io = IO.format(t=config_type)
        _model(repo, f"numpy_{datatype}", f'backend: "numpy" max_batch_size: 0\n{io}')
        if _installed("naiad_backend_python"):
            version = _model(repo, f"python_{datatype}", f'backend: "python" max_batch_size: 0\n{io}')
            (version / "model.py").write_text(PYTHON_IDENTITY)
    if _installed("naiad_backend_onnx") and _installed("onnx"):
        _onnx_identity(
            _model(repo, "onnx_FP32", f'platform: "onnxruntime_onnx" max_batch_size: 0\n{IO.format(t="TYPE_FP32")}')
        )
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    with ServerProcess(
        repo,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-metrics",
        "false",
        env={"PYTHONPATH": pythonpath},
    ) as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


def _empty(shape: list[int], datatype: str) -> np.ndarray:
    return np.zeros(shape, np.float32 if datatype == "FP32" else np.object_)


@pytest.mark.parametrize(
    "model, datatype",
    [
        ("numpy_FP32", "FP32"),
        ("numpy_BYTES", "BYTES"),
        pytest.param(
            "python_FP32",
            "FP32",
            marks=pytest.mark.skipif(
                not _installed("naiad_backend_python"), reason="naiad_backend_python is not installed"
            ),
        ),
        pytest.param(
            "python_BYTES",
            "BYTES",
            marks=pytest.mark.skipif(
                not _installed("naiad_backend_python"), reason="naiad_backend_python is not installed"
            ),
        ),
        pytest.param(
            "onnx_FP32",
            "FP32",
            marks=pytest.mark.skipif(
                not _installed("naiad_backend_onnx"), reason="naiad_backend_onnx is not installed"
            ),
        ),
    ],
)
def test_zero_element_tensors_round_trip(server, model, datatype):
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    for shape in SHAPES:
        for binary in (False, True):
            tensor = httpclient.InferInput("INPUT0", shape, datatype)
            tensor.set_data_from_numpy(_empty(shape, datatype), binary_data=binary)
            output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)
            result = http.infer(model, [tensor], outputs=[output])
            assert result.get_output("OUTPUT0")["shape"] == shape
            assert result.as_numpy("OUTPUT0").shape == tuple(shape), (shape, binary)
        tensor = grpcclient.InferInput("INPUT0", shape, datatype)
        tensor.set_data_from_numpy(_empty(shape, datatype))
        result = grpc.infer(model, [tensor])
        assert list(result.get_output("OUTPUT0").shape) == shape
        assert result.as_numpy("OUTPUT0").shape == tuple(shape)
