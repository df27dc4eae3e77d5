"""Ensembles answer as Triton's do, seen through tritonclient over HTTP and gRPC: the
batch dimension a batching step needed is removed again for a non-batching ensemble,
classification uses the labels of the step that produced the tensor, an output a step
did not produce is left out of the answer, and sequence flags and correlation IDs reach
a sequence-batched step (its errors worded as Triton words them)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from ensemble_repo import ensemble, model, numpy_model, step, tensor, unary
from numpy_backend import SEQUENCE_CONTROLS
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent


def _accumulate(repo: Path, name: str, corrid_type: str, strategy: str) -> None:
    """The numpy backend's sequence model: a running sum per sequence, echoing its controls."""
    model(
        repo,
        name,
        f"""backend: "numpy" max_batch_size: 4
input [{{name:"INPUT" data_type: TYPE_INT32 dims:[1]}}]
output [{{name:"OUTPUT" data_type: TYPE_INT32 dims:[1]}}, {{name:"CONTROLS" data_type: TYPE_INT32 dims:[3]}},
        {{name:"CORRID_OUT" data_type: {corrid_type} dims:[1]}}]
parameters {{key:"op" value {{string_value:"accumulate"}}}}
sequence_batching {{ {strategy} {SEQUENCE_CONTROLS % corrid_type} }}""",
    )
    ensemble(
        repo,
        f"ensemble_{name}",
        [tensor("IN", "TYPE_INT32", "[1]")],
        [tensor("SUM", "TYPE_INT32", "[1]"), tensor("FLAGS", "TYPE_INT32", "[3]"), tensor("ID", corrid_type, "[1]")],
        [step(name, {"INPUT": "IN"}, {"OUTPUT": "SUM", "CONTROLS": "FLAGS", "CORRID_OUT": "ID"})],
        max_batch_size=4,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("ensemble-semantics")
    # A non-batching ensemble over a batching step.
    unary(repo, "identity16", dims="[16]", max_batch_size=8)
    ensemble(
        repo,
        "flat16",
        [tensor("IN", dims="[16]")],
        [tensor("OUT", dims="[16]")],
        [step("identity16", {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})],
        max_batch_size=0,
    )
    # Labels live with the step model only.
    numpy_model(
        repo,
        "scores",
        "identity",
        [tensor("INPUT0")],
        ['{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] label_filename: "labels.txt" }'],
    )
    (repo / "scores" / "labels.txt").write_text("cat\ndog\nbird\nfish\n")
    for name, batch in (("classify", 8), ("classify_flat", 0)):
        ensemble(
            repo,
            name,
            [tensor("IN")],
            [tensor("CLASSES")],
            [step("scores", {"INPUT0": "IN"}, {"OUTPUT0": "CLASSES"})],
            max_batch_size=batch,
        )
    # A step that produces OUTPUT1 only when given its optional INPUT1.
    numpy_model(
        repo,
        "pair",
        "identity",
        [tensor("INPUT0"), '{ name: "INPUT1" data_type: TYPE_FP32 dims: [4] optional: true }'],
        [tensor("OUTPUT0"), tensor("OUTPUT1")],
    )
    ensemble(
        repo,
        "maybe_pair",
        [tensor("A"), '{ name: "B" data_type: TYPE_FP32 dims: [4] optional: true }'],
        [tensor("X"), tensor("Y")],
        [step("pair", {"INPUT0": "A", "INPUT1": "B"}, {"OUTPUT0": "X", "OUTPUT1": "Y"})],
    )
    _accumulate(repo, "accumulate", "TYPE_UINT64", "direct { }")
    # A step that hands its output to the sequence named by its value, started and ended.
    for name in ("reassign", "reassign_too"):
        unary(
            repo,
            name,
            "reassign_sequence",
            dims="[1]",
            max_batch_size=4,
            data_type="TYPE_INT32",
            start="true",
            end="true",
        )
    ensemble(
        repo,
        "reassigned",
        [tensor("IN", "TYPE_INT32", "[1]")],
        [
            tensor("X", "TYPE_INT32", "[1]"),
            tensor("SUM", "TYPE_INT32", "[1]"),
            tensor("FLAGS", "TYPE_INT32", "[3]"),
            tensor("ID", "TYPE_UINT64", "[1]"),
        ],
        [
            step("reassign", {"INPUT0": "IN"}, {"OUTPUT0": "X"}),
            step("accumulate", {"INPUT": "X"}, {"OUTPUT": "SUM", "CONTROLS": "FLAGS", "CORRID_OUT": "ID"}),
        ],
        max_batch_size=4,
    )
    numpy_model(
        repo,
        "add_ints",
        "add_sub",
        [tensor("INPUT0", "TYPE_INT32", "[1]"), tensor("INPUT1", "TYPE_INT32", "[1]")],
        [tensor("OUTPUT0", "TYPE_INT32", "[1]"), tensor("OUTPUT1", "TYPE_INT32", "[1]")],
        max_batch_size=4,
    )
    ensemble(
        repo,
        "conflicting",
        [tensor("A", "TYPE_INT32", "[1]"), tensor("B", "TYPE_INT32", "[1]")],
        [tensor("SUM", "TYPE_INT32", "[1]")],
        [
            step("reassign", {"INPUT0": "A"}, {"OUTPUT0": "XA"}),
            step("reassign_too", {"INPUT0": "B"}, {"OUTPUT0": "XB"}),
            step("add_ints", {"INPUT0": "XA", "INPUT1": "XB"}, {"OUTPUT0": "SUM"}),
        ],
        max_batch_size=4,
    )
    _accumulate(repo, "accumulate_str", "TYPE_STRING", "oldest { max_candidate_sequences: 4 }")
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    with ServerProcess(
        repo, "--backend-plugin", "numpy_backend:NumpyPlugin", "--log-verbose", "1", env={"PYTHONPATH": pythonpath}
    ) as process:
        yield process
        assert "Traceback" not in process.log(), process.log()


def _clients(server):
    return (
        (httpclient, httpclient.InferenceServerClient(server.http_url)),
        (grpcclient, grpcclient.InferenceServerClient(server.grpc_url)),
    )


def _input(module, name: str, array: np.ndarray, datatype: str = "FP32"):
    tensor = module.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def test_a_non_batching_ensemble_over_a_batching_step_answers_without_the_batch_dimension(server):
    data = np.arange(16, dtype=np.float32)
    for module, client in _clients(server):
        result = client.infer("flat16", [_input(module, "IN", data)])
        output = result.as_numpy("OUT")
        assert output.shape == (16,), module.__name__
        np.testing.assert_array_equal(output, data)


def test_classification_through_an_ensemble_uses_the_step_models_labels(server):
    for module, client in _clients(server):
        batched = client.infer(
            "classify",
            [_input(module, "IN", np.array([[1, 2, 3, 4]], np.float32))],
            outputs=[module.InferRequestedOutput("CLASSES", class_count=2)],
        )
        assert batched.as_numpy("CLASSES").tolist() == [[b"4.000000:3:fish", b"3.000000:2:bird"]]
        flat = client.infer(
            "classify_flat",
            [_input(module, "IN", np.array([9, 2, 3, 4], np.float32))],
            outputs=[module.InferRequestedOutput("CLASSES", class_count=1)],
        )
        assert flat.as_numpy("CLASSES").tolist() == [b"9.000000:0:cat"]


def test_an_output_a_step_did_not_produce_is_left_out_of_the_answer(server):
    a = np.full((1, 4), 2, np.float32)
    for module, client in _clients(server):
        # Asked for both outputs; the step made only X (it got no INPUT1).
        result = client.infer(
            "maybe_pair",
            [_input(module, "A", a)],
            outputs=[module.InferRequestedOutput("X"), module.InferRequestedOutput("Y")],
        )
        np.testing.assert_array_equal(result.as_numpy("X"), a)
        assert result.as_numpy("Y") is None
        # Given B, the step makes both.
        both = client.infer("maybe_pair", [_input(module, "A", a), _input(module, "B", a + 1)])
        np.testing.assert_array_equal(both.as_numpy("Y"), a + 1)
    assert "did not output tensor Y" in server.log()


@pytest.mark.parametrize(
    "name, ids", [("ensemble_accumulate", (7001, 7002)), ("ensemble_accumulate_str", ("left", "right"))]
)
def test_sequence_flags_and_correlation_ids_reach_a_sequence_batched_step(server, name, ids):
    corrid_type = np.uint64 if isinstance(ids[0], int) else np.object_
    for number, (module, client) in enumerate(_clients(server)):
        a, b = (i + 100 * number if isinstance(i, int) else f"{i}{number}" for i in ids)

        def step(value, corrid, start=False, end=False):
            result = client.infer(
                name,
                [_input(module, "IN", np.array([[value]], np.int32), "INT32")],
                sequence_id=corrid,
                sequence_start=start,
                sequence_end=end,
            )
            identity = result.as_numpy("ID").reshape(-1)[0]
            expected = corrid if corrid_type is np.uint64 else corrid.encode()
            assert identity == expected
            return int(result.as_numpy("SUM").reshape(-1)[0]), result.as_numpy("FLAGS").reshape(-1).tolist()

        assert step(1, a, start=True) == (1, [1, 0, 1])
        assert step(10, b, start=True) == (10, [1, 0, 1])
        assert step(2, a) == (3, [0, 0, 1])
        assert step(20, b, end=True) == (30, [0, 1, 1])
        assert step(3, a, end=True) == (6, [0, 1, 1])


def test_sequence_errors_through_an_ensemble_are_worded_as_tritons(server):
    base = "ensemble_accumulate"
    for module, client in _clients(server):
        one = [_input(module, "IN", np.array([[1]], np.int32), "INT32")]
        with pytest.raises(InferenceServerException) as info:
            client.infer(base, one)
        assert info.value.message().startswith(
            f"in ensemble '{base}', inference request to model 'accumulate' must specify a non-zero or non-empty "
            "correlation ID"
        ), info.value.message()
        two = [_input(module, "IN", np.array([[1], [2]], np.int32), "INT32")]
        with pytest.raises(InferenceServerException) as info:
            client.infer(base, two, sequence_id=55, sequence_start=True)
        assert info.value.message().startswith(
            f"in ensemble '{base}', inference request to model 'accumulate' must specify batch-size 1 due to "
            "requirements of sequence batcher"
        ), info.value.message()


def test_a_step_response_can_reassign_the_sequence_of_the_steps_after_it(server):
    for module, client in _clients(server):
        # No sequence on the request: the first step names sequence 77, started and ended.
        result = client.infer("reassigned", [_input(module, "IN", np.array([[77]], np.int32), "INT32")])
        assert int(result.as_numpy("SUM").reshape(-1)[0]) == 77
        assert result.as_numpy("FLAGS").reshape(-1).tolist() == [1, 1, 1]
        assert int(result.as_numpy("ID").reshape(-1)[0]) == 77
        # X comes from the reassigning step: the answer names the sequence, as Triton's does.
        response = result.get_response()
        if module is httpclient:
            parameters = response["parameters"]
        else:
            parameters = {
                key: getattr(value, value.WhichOneof("parameter_choice")) for key, value in response.parameters.items()
            }
        assert parameters["sequence_id"] == 77
        assert parameters["sequence_start"] is True and parameters["sequence_end"] is True


def test_a_streamed_ensemble_answer_names_the_reassigned_sequence_too(server):
    """The same over ModelStreamInfer: the streamed response carries `sequence_id`,
    `sequence_start` and `sequence_end` beside Triton's `triton_final_response`."""
    import queue

    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    client.async_stream_infer("reassigned", [_input(grpcclient, "IN", np.array([[78]], np.int32), "INT32")])
    client.stop_stream()
    result, error = answers.get(timeout=30)
    assert error is None, error
    assert int(result.as_numpy("SUM").reshape(-1)[0]) == 78
    parameters = {
        key: getattr(value, value.WhichOneof("parameter_choice"))
        for key, value in result.get_response().parameters.items()
    }
    assert parameters == {
        "sequence_id": 78,
        "sequence_start": True,
        "sequence_end": True,
        "triton_final_response": True,
    }


def test_streamed_ensemble_answers_carry_the_sequence_flags_of_their_requests(server):
    """Triton's L0_ensemble test_ensemble_sequence_flags: three requests of one sequence to
    an ensemble of models without a sequence batcher, on one stream; each answer names the
    sequence and its START / END flags, in request order."""
    import queue

    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    data = np.arange(4, dtype=np.float32).reshape(1, 4)
    for index, (start, end) in enumerate([(True, False), (False, False), (False, True)]):
        client.async_stream_infer(
            "maybe_pair",
            [_input(grpcclient, "A", data)],
            request_id=f"r{index}",
            sequence_id=4242,
            sequence_start=start,
            sequence_end=end,
        )
    client.stop_stream()
    flags = []
    while not answers.empty():
        result, error = answers.get()
        assert error is None, error.message()
        response = result.get_response()
        parameters = response.parameters
        assert parameters["sequence_id"].int64_param == 4242 or parameters["sequence_id"].uint64_param == 4242
        flags.append((response.id, parameters["sequence_start"].bool_param, parameters["sequence_end"].bool_param))
    assert flags == [("r0", True, False), ("r1", False, False), ("r2", False, True)]


def test_steps_reading_tensors_of_two_reassigned_sequences_keep_the_first(server):
    a, b = np.array([[5]], np.int32), np.array([[6]], np.int32)
    client = httpclient.InferenceServerClient(server.http_url)
    result = client.infer("conflicting", [_input(httpclient, "A", a, "INT32"), _input(httpclient, "B", b, "INT32")])
    assert int(result.as_numpy("SUM").reshape(-1)[0]) == 11
    assert "different sequence parameters reach step 2 (model 'add_ints')" in server.log()
