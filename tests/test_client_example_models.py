"""Our equivalents of the models Triton's Python client examples expect
(scripts/client_examples/models), served by naiad, answer what those examples check: sum and
difference ("simple", "simple_string", "simple_int8"), identities, the sequences' values, the
decoupled repeat, and the stand-in classifier's labels. scripts/run-client-examples.sh runs the
examples themselves against a checkout of Triton's client repository."""

from __future__ import annotations

import importlib.util
import queue
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th

from naiad.testing import ServerProcess

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "client_examples"
PYTHON_MODELS = (
    "simple",
    "simple_string",
    "simple_int8",
    "simple_identity",
    "simple_sequence",
    "simple_dyna_sequence",
    "simple_string_dyna_sequence",
    "repeat_int32",
    "custom_identity_int32",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("build_repositories", SCRIPTS / "build_repositories.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    repo = tmp_path_factory.mktemp("client_example_models")
    for name in PYTHON_MODELS:
        shutil.copytree(SCRIPTS / "models" / name, repo / name, symlinks=False)
    densenet = repo / "densenet_onnx"
    shutil.copytree(SCRIPTS / "models" / "densenet_onnx", densenet)
    (densenet / "1").mkdir()
    (densenet / "1" / "model.onnx").write_bytes(builder.classifier_onnx(batched=False))
    builder.write_labels(densenet / "densenet_labels.txt", "densenet_class")
    with ServerProcess(repo) as process:
        yield process


def add_sub_inputs(module, a: np.ndarray, b: np.ndarray, datatype: str) -> list:
    inputs = [
        module.InferInput("INPUT0", list(a.shape), datatype),
        module.InferInput("INPUT1", list(b.shape), datatype),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs


def test_simple_models_add_and_subtract(server):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.int32)
    result = th.InferenceServerClient(server.http_url).infer("simple", add_sub_inputs(th, a, b, "INT32"))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    with tg.InferenceServerClient(server.grpc_url) as client:
        strings = add_sub_inputs(tg, a.astype(str).astype(np.object_), b.astype(str).astype(np.object_), "BYTES")
        result = client.infer("simple_string", strings)
        assert [int(v) for v in result.as_numpy("OUTPUT0")[0]] == list(range(1, 17))
        assert [int(v) for v in result.as_numpy("OUTPUT1")[0]] == list(range(-1, 15))
        small = np.full((1, 16), 100, dtype=np.int8)
        result = client.infer("simple_int8", add_sub_inputs(tg, small, small, "INT8"))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 16), -56, np.int8))  # wraps as INT8
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), np.zeros((1, 16), np.int8))


def test_identity_models(server):
    with tg.InferenceServerClient(server.grpc_url) as client:
        for model, data, datatype in [
            ("custom_identity_int32", np.arange(16, dtype=np.int32).reshape(1, 16), "INT32"),
            ("simple_identity", np.array([[b"a", b"bc", b""]], dtype=np.object_), "BYTES"),
        ]:
            tensor = tg.InferInput("INPUT0", list(data.shape), datatype)
            tensor.set_data_from_numpy(data)
            np.testing.assert_array_equal(client.infer(model, [tensor]).as_numpy("OUTPUT0"), data)


def run_sequence(client, model: str, sequence_id, values: list[int]) -> list[int]:
    answers = []
    for index, value in enumerate(values):
        tensor = tg.InferInput("INPUT", [1, 1], "INT32")
        tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
        result = client.infer(
            model, [tensor], sequence_id=sequence_id, sequence_start=index == 0, sequence_end=index == len(values) - 1
        )
        answers.append(int(result.as_numpy("OUTPUT")[0][0]))
    return answers


def test_sequence_models_answer_as_the_examples_expect(server):
    values = [11, 7, 5, 3, 2, 0, 1]  # the examples' values
    with tg.InferenceServerClient(server.grpc_url) as client:
        # Stateless: the first answer is the input plus one (START), then each input itself.
        assert run_sequence(client, "simple_sequence", str(uuid.uuid4()), [20, *values]) == [21, *values]
        # The same, and END adds the correlation ID to the last answer.
        assert run_sequence(client, "simple_dyna_sequence", 1000, [0, *values]) == [1, *values[:-1], 1 + 1000]
        # An accumulator per sequence, and END adds the string correlation ID read as a number.
        negated = [-v for v in values]
        expected = list(np.cumsum([20, *negated]))
        expected[-1] += 1002
        assert run_sequence(client, "simple_string_dyna_sequence", "1002", [20, *negated]) == expected


def test_repeat_int32_streams_one_response_per_input(server):
    answers: queue.Queue = queue.Queue()
    inputs = [
        tg.InferInput("IN", [3], "INT32"),
        tg.InferInput("DELAY", [3], "UINT32"),
        tg.InferInput("WAIT", [1], "UINT32"),
    ]
    inputs[0].set_data_from_numpy(np.array([100, 101, 102], dtype=np.int32))
    inputs[1].set_data_from_numpy(np.array([10, 10, 10], dtype=np.uint32))
    inputs[2].set_data_from_numpy(np.array([10], dtype=np.uint32))
    with tg.InferenceServerClient(server.grpc_url) as client:
        client.start_stream(callback=lambda result, error: answers.put(error or result))
        client.async_stream_infer("repeat_int32", inputs, enable_empty_final_response=True)
        received = [answers.get(timeout=30) for _ in range(4)]
        client.stop_stream()
    for answer in received:
        assert not isinstance(answer, Exception), answer
    assert [int(r.as_numpy("OUT")[0]) for r in received[:3]] == [100, 101, 102]
    assert [int(r.as_numpy("IDX")[0]) for r in received[:3]] == [0, 1, 2]
    final = received[3].get_response()
    assert final.parameters["triton_final_response"].bool_param and not final.outputs


def test_densenet_stand_in_classifies_with_labels(server):
    image = np.zeros((3, 224, 224), dtype=np.float32)
    tensor = th.InferInput("data_0", [3, 224, 224], "FP32")
    tensor.set_data_from_numpy(image)
    result = th.InferenceServerClient(server.http_url).infer(
        "densenet_onnx", [tensor], outputs=[th.InferRequestedOutput("fc6_1", class_count=2)]
    )
    classes = [entry.decode().split(":") for entry in result.as_numpy("fc6_1")]
    assert len(classes) == 2 and all(label == f"densenet_class_{index}" for _, index, label in classes)
    assert float(classes[0][0]) >= float(classes[1][0])
