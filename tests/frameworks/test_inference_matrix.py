"""The inference matrix: every datatype x {batching, non-batching} x {ONNX, TorchScript,
Python, an ensemble fanning out to all three} x {HTTP JSON, HTTP binary, gRPC}, answers
compared with numpy, classification with and without labels.

One server serves the whole matrix; each test is one cell (model kind, datatype, batching)
asked over the three protocols. HTTP JSON asks OUTPUT0 of numeric models as classes
(labelled by the model that computed it), gRPC asks OUTPUT1 as classes (no labels), HTTP
binary asks every output as a tensor."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from matrix_models import DATATYPES, LABELS, NUMPY, Target, dims, expected, numeric, targets, write_matrix

from naiad.testing import ServerProcess

FRAMEWORKS = [
    name
    for name, module in (
        ("onnx", "naiad_backend_onnx"),
        ("pytorch", "naiad_backend_pytorch"),
        ("python", "naiad_backend_python"),
    )
    if importlib.util.find_spec(module) is not None
]
KINDS = FRAMEWORKS + (["ensemble"] if FRAMEWORKS else [])
CLASSES = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("inference-matrix")
    names = write_matrix(repo, FRAMEWORKS)
    with ServerProcess(repo, timeout=300) as process:
        client = httpclient.InferenceServerClient(process.http_url)
        not_ready = [name for name in names if not client.is_model_ready(name)]
        assert not not_ready, process.log()
        process.http = client
        process.grpc = grpcclient.InferenceServerClient(process.grpc_url)
        yield process
        process.grpc.close()
        client.close()
        assert "Traceback" not in process.log(), process.log()


def _inputs(datatype: str, batching: bool) -> tuple[np.ndarray, np.ndarray]:
    rows = 2 if batching else 1
    rng = np.random.default_rng(DATATYPES.index(datatype))
    if datatype == "BYTES":
        a = np.array([[f"row {r} ünïcode".encode()] for r in range(rows)], dtype=np.object_)
        b = np.array([[f"second {r}".encode()] for r in range(rows)], dtype=np.object_)
    elif datatype == "BOOL":
        a = rng.integers(0, 2, (rows, LABELS)).astype(np.bool_)
        b = rng.integers(0, 2, (rows, LABELS)).astype(np.bool_)
    else:
        # Distinct values in each row (no ties in the classes), small enough for every type.
        a = np.stack([rng.permutation(LABELS) * 5 + 10 + r for r in range(rows)])
        b = np.stack([np.full(LABELS, r + 1) for r in range(rows)])
        offset = 0.25 if datatype.startswith("FP") else 0
        a, b = (a + offset).astype(NUMPY[datatype]), b.astype(NUMPY[datatype])
    if not batching:
        a, b = a[0], b[0]
    assert a.shape == ((rows,) if batching else ()) + tuple(dims(datatype))
    return a, b


def _classes(values: np.ndarray, labels: str | None, batching: bool) -> list:
    """What Triton's classification extension answers for `values`: "value:index[:label]"."""
    rows = values.reshape(-1, values.shape[-1])
    answer = []
    for row in rows:
        order = np.argsort(-row.astype(np.float64), kind="stable")[:CLASSES]
        texts = []
        for index in order:
            value = f"{float(row[index]):f}" if row.dtype.kind == "f" else f"{int(row[index])}"
            texts.append((f"{value}:{index}" + (f":{labels}{index}" if labels else "")).encode())
        answer.append(texts)
    return answer if batching else answer[0]


def _as_bytes(array: np.ndarray) -> list:
    return [item if isinstance(item, bytes) else str(item).encode() for item in array.reshape(-1)]


def _check(result, target: Target, a: np.ndarray, b: np.ndarray, classified: set[str], batching: bool, how: str):
    for output in target.outputs:
        want = expected(output.kind, a, b)[output.role]
        got = result.as_numpy(output.name)
        where = f"{target.model} {output.name} over {how}"
        assert got is not None, where
        if output.name in classified:
            texts = [_as_bytes(row) for row in got] if batching else _as_bytes(got)
            assert texts == _classes(want, output.labels, batching), where
        elif want.dtype == np.object_:
            assert got.shape == want.shape and _as_bytes(got) == _as_bytes(want), where
        else:
            assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, got.shape)
            np.testing.assert_array_equal(got, want, err_msg=where)


@pytest.mark.parametrize("batching", [True, False], ids=["batch", "single"])
@pytest.mark.parametrize("datatype", DATATYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_matrix_cell(server, kind, datatype, batching):
    target = targets(FRAMEWORKS, datatype, batching)[kind]
    a, b = _inputs(datatype, batching)
    wire_type = datatype

    for how, module, client in (
        ("HTTP JSON", httpclient, server.http),
        ("HTTP binary", httpclient, server.http),
        ("gRPC", grpcclient, server.grpc),
    ):
        binary = how != "HTTP JSON"
        inputs = []
        for tensor_name, array in zip(target.inputs, (a, b)):
            tensor = module.InferInput(tensor_name, list(array.shape), wire_type)
            if module is httpclient:
                tensor.set_data_from_numpy(array, binary_data=binary)
            else:
                tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        classified: set[str] = set()
        outputs = []
        for output in target.outputs:
            # JSON: the labelled OUTPUT0s as classes; gRPC: the unlabelled OUTPUT1s.
            classify = numeric(datatype) and (
                (how == "HTTP JSON" and output.role == 0) or (how == "gRPC" and output.role == 1)
            )
            if classify:
                classified.add(output.name)
            options = {"class_count": CLASSES} if classify else {}
            if module is httpclient:
                outputs.append(module.InferRequestedOutput(output.name, binary_data=binary, **options))
            else:
                outputs.append(module.InferRequestedOutput(output.name, **options))
        result = client.infer(target.model, inputs, outputs=outputs)
        _check(result, target, a, b, classified, batching, how)
