"""Iterative sequences and request rescheduling, as Triton's QA model uses them
(qa/python_models/iterative_sequence): one request, run again each time the model releases
it with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, streaming one response per execution.

Checked through tritonclient against `naiad serve`. The same tests pass against tritonserver
(shared/bench/triton.sh serving MODELS) but for four. Where the model is not iterative,
Triton's core refuses the reschedule with the error asserted here, which its Python backend
only logs (the client then waits for ever); naiad answers it, as Triton's QA backend
(src/test/iterative_sequence) does. Triton's statistics count one failure more, for the
internal request that ends each iterative sequence. And Triton fails an iterative request
to a model whose CORRID control is TYPE_STRING."""

from __future__ import annotations

import queue
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

# Counts down from IN, one response per execution, keyed by correlation id so that several
# sequences can share a batch. Each response tells what the model saw: the request's flags,
# its correlation id and how many requests the execution had.
COUNTDOWN = """
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.batched = json.loads(args["model_config"])["max_batch_size"] > 0
        self.remaining = {}

    def tensor(self, name, value, dtype):
        array = np.array([value], dtype)
        return pb_utils.Tensor(name, array.reshape(1, 1) if self.batched else array)

    def execute(self, requests):
        time.sleep(0.05)
        for request in requests:
            key = request.correlation_id()
            start = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)[0])
            left = self.remaining.get(key, start) - 1
            sender = request.get_response_sender()
            response = pb_utils.InferenceResponse(output_tensors=[
                self.tensor("OUT", left, np.int32),
                self.tensor("FLAGS", request.flags(), np.int32),
                self.tensor("CORRID", str(key).encode(), np.object_),
                self.tensor("BATCH", len(requests), np.int32),
            ])
            if left <= 0:
                self.remaining.pop(key, None)
                sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                self.remaining[key] = left
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                sender.send(response)
        return None
"""

# Not decoupled: the python_backend README's form. A rescheduled request's place in the
# returned list is None; the answer comes from the third execution.
THIRD_TIME = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.executions = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            key = request.correlation_id()
            count = self.executions.get(key, 0) + 1
            self.executions[key] = count
            answer = pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", np.array([count], np.int32))])
            rude = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0] < 0
            if count < 3:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                responses.append(answer if rude else None)
            else:
                del self.executions[key]
                responses.append(answer)
        return responses
"""

_OUTPUTS = ("OUT", "FLAGS", "CORRID", "BATCH")


def _config(max_batch_size: int, decoupled: bool, scheduling: str, outputs=_OUTPUTS, extra: str = "") -> str:
    types = {"CORRID": "TYPE_STRING"}
    output = ", ".join(f'{{ name: "{n}" data_type: {types.get(n, "TYPE_INT32")} dims: [ 1 ] }}' for n in outputs)
    return textwrap.dedent(f"""\
        backend: "python"
        max_batch_size: {max_batch_size}
        model_transaction_policy {{ decoupled: {str(decoupled).lower()} }}
        input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
        output [ {output} ]
        {scheduling}
        instance_group [ {{ kind: KIND_CPU count: 1 }} ]
        {extra}
        """)


def _iterative(settings: str = "") -> str:
    return f"sequence_batching {{ iterative_sequence: true {settings} }}"


_IN_PROCESS = 'parameters { key: "execution_mode" value: { string_value: "in_process" } }'
_INLINE = 'parameters { key: "execution_mode" value: { string_value: "inline" } }'
MODELS = {
    # A minute of idle time: only the end of its request may free the slot in the tests.
    "countdown": (COUNTDOWN, _config(0, True, _iterative("max_sequence_idle_microseconds: 60000000"))),
    "countdown_in_process": (COUNTDOWN, _config(0, True, _iterative(), extra=_IN_PROCESS)),
    "countdown_inline": (COUNTDOWN, _config(0, True, _iterative(), extra=_INLINE)),
    "countdown_batched": (COUNTDOWN, _config(4, True, _iterative())),
    "countdown_oldest": (COUNTDOWN, _config(4, True, _iterative("oldest { max_candidate_sequences: 4 }"))),
    "countdown_string_ids": (
        COUNTDOWN,
        _config(
            0,
            True,
            _iterative(
                'control_input [{ name: "CORRID_IN" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING }] }]'
            ),
        ),
    ),
    # Models whose scheduler cannot reschedule.
    "countdown_sequence": (COUNTDOWN, _config(0, True, "sequence_batching { }")),
    "countdown_dynamic": (COUNTDOWN, _config(0, True, "dynamic_batching { }")),
    "countdown_plain": (COUNTDOWN, _config(0, True, "")),
    "third_time": (THIRD_TIME, _config(0, False, _iterative(), outputs=("OUT",))),
    "third_time_in_process": (THIRD_TIME, _config(0, False, _iterative(), outputs=("OUT",), extra=_IN_PROCESS)),
    "third_time_plain": (THIRD_TIME, _config(0, False, "", outputs=("OUT",))),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repository = tmp_path_factory.mktemp("iterative")
    for name, (code, config) in MODELS.items():
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "1" / "model.py").write_text(code)
        (repository / name / "config.pbtxt").write_text(config)
    with ServerProcess(Path(repository)) as running:
        yield running


class Stream:
    """A tritonclient gRPC stream and what it received, response by response."""

    def __init__(self, url: str) -> None:
        self.client = grpcclient.InferenceServerClient(url)
        self.received: queue.Queue = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.received.put(error or result))

    def send(self, model: str, value: int, batched: bool = False, **sequence) -> None:
        tensor = grpcclient.InferInput("IN", [1, 1] if batched else [1], "INT32")
        tensor.set_data_from_numpy(np.array([[value]] if batched else [value], dtype=np.int32))
        self.client.async_stream_infer(model, [tensor], request_id=f"{model}-{value}", **sequence)

    def until_final(self, count: int = 1) -> list:
        """Every response until `count` requests have sent their final one."""
        seen = []
        while count:
            item = self.received.get(timeout=30)
            seen.append(item)
            if isinstance(item, InferenceServerException) or _final(item):
                count -= 1
        return seen

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


def _final(result) -> bool:
    flag = result.get_response().parameters.get("triton_final_response")
    return flag is not None and flag.bool_param


def _value(result, name: str):
    return result.as_numpy(name).reshape(-1)[0]


@pytest.mark.parametrize("model", ["countdown", "countdown_in_process", "countdown_inline"])
def test_a_request_without_correlation_id_runs_until_the_model_stops_rescheduling(server, model):
    stream = Stream(server.grpc_url)
    try:
        stream.send(model, 3)
        responses = stream.until_final()
    finally:
        stream.close()
    assert [_value(r, "OUT") for r in responses] == [2, 1, 0]
    assert [_final(r) for r in responses] == [False, False, True]
    # The scheduler gave the request a correlation id and the START flag; the executions
    # after a reschedule carry no flag (END never comes), as in Triton.
    assert [_value(r, "FLAGS") for r in responses] == [1, 0, 0]
    assigned = {_value(r, "CORRID") for r in responses}
    assert len(assigned) == 1 and assigned.pop() not in (b"0", b"")
    assert {r.get_response().id for r in responses} == {f"{model}-3"}


def test_each_request_is_a_sequence_of_its_own(server):
    stream = Stream(server.grpc_url)
    try:
        for value in (2, 3, 4):
            stream.send("countdown", value)
        responses = stream.until_final(3)
    finally:
        stream.close()
    # One slot (max_batch_size 0): the sequences run one after another, in arrival order,
    # each under its own correlation id.
    assert [(r.get_response().id, _value(r, "OUT")) for r in responses] == [
        ("countdown-2", 1),
        ("countdown-2", 0),
        ("countdown-3", 2),
        ("countdown-3", 1),
        ("countdown-3", 0),
        ("countdown-4", 3),
        ("countdown-4", 2),
        ("countdown-4", 1),
        ("countdown-4", 0),
    ]
    ids = {}
    for response in responses:
        ids.setdefault(response.get_response().id, set()).add(_value(response, "CORRID"))
    assert all(len(assigned) == 1 for assigned in ids.values())
    assert len(set.union(*ids.values())) == 3


def test_a_model_with_string_correlation_ids_gets_a_string_one(server):
    """(tritonserver fails this request: "unexpected number of string elements 2 for
    inference input 'CORRID_IN', expecting 1".)"""
    stream = Stream(server.grpc_url)
    try:
        stream.send("countdown_string_ids", 2)
        responses = stream.until_final()
    finally:
        stream.close()
    assert [_value(r, "OUT") for r in responses] == [1, 0]
    assigned = {_value(r, "CORRID") for r in responses}
    assert len(assigned) == 1 and assigned.pop().isdigit()


def test_a_client_correlation_id_with_start_is_kept(server):
    stream = Stream(server.grpc_url)
    try:
        stream.send("countdown", 2, sequence_id=4242, sequence_start=True)
        responses = stream.until_final()
    finally:
        stream.close()
    assert [(_value(r, "OUT"), _value(r, "CORRID"), _value(r, "FLAGS")) for r in responses] == [
        (1, b"4242", 1),
        (0, b"4242", 0),
    ]


@pytest.mark.parametrize("model", ["countdown_batched", "countdown_oldest"])
def test_rescheduled_requests_batch_with_new_ones(server, model):
    """Continuous batching: a short request sent while a long one is in flight joins its
    batches and finishes first; the long one goes on without waiting for anything."""
    stream = Stream(server.grpc_url)
    try:
        stream.send(model, 12, batched=True)
        first = stream.received.get(timeout=30)
        assert _value(first, "BATCH") == 1
        stream.send(model, 2, batched=True)
        responses = stream.until_final(2)
    finally:
        stream.close()
    finals = [r.get_response().id for r in responses if _final(r)]
    assert finals == [f"{model}-2", f"{model}-12"]
    short = [r for r in responses if r.get_response().id == f"{model}-2"]
    assert [_value(r, "OUT") for r in short] == [1, 0]
    # Its first execution shares the long one's batch (its second does too in naiad; in
    # Triton's `oldest` that depends on the timing of its batcher thread).
    assert _value(short[0], "BATCH") == 2
    long = [_value(r, "OUT") for r in [first] + responses if r.get_response().id == f"{model}-12"]
    assert long == list(range(11, -1, -1))


@pytest.mark.parametrize(
    "model,sequence",
    [
        ("countdown_sequence", {"sequence_id": 77, "sequence_start": True}),
        ("countdown_dynamic", {}),
        ("countdown_plain", {}),
    ],
)
def test_rescheduling_a_model_that_is_not_iterative_fails_with_tritons_error(server, model, sequence):
    stream = Stream(server.grpc_url)
    try:
        stream.send(model, 3, **sequence)
        responses = stream.until_final()
    finally:
        stream.close()
    # The response sent before the release arrives; then the request ends with the error.
    assert _value(responses[0], "OUT") == 2
    error = responses[-1]
    assert isinstance(error, InferenceServerException)
    assert (
        "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model is not "
        "configured to handle such a flag."
    ) in error.message()
    # The model still serves (a new correlation id: the model keys its count by it).
    stream = Stream(server.grpc_url)
    try:
        stream.send(model, 1, sequence_id=78, sequence_start=True)
        assert [_value(r, "OUT") for r in stream.until_final()] == [0]
    finally:
        stream.close()


@pytest.mark.parametrize("model", ["third_time", "third_time_in_process"])
def test_a_non_decoupled_model_answers_once_after_its_last_execution(server, model):
    for module, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        client = module.InferenceServerClient(url)
        tensor = module.InferInput("IN", [1], "INT32")
        tensor.set_data_from_numpy(np.array([5], dtype=np.int32))
        assert client.infer(model, [tensor]).as_numpy("OUT").tolist() == [3]


def test_a_response_for_a_rescheduled_request_is_an_error(server):
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([-1], dtype=np.int32))
    with pytest.raises(InferenceServerException) as caught:
        client.infer("third_time", [tensor])
    assert "Expected a None object in the execute function return list for reschduled request" in caught.value.message()


def test_a_non_decoupled_model_that_is_not_iterative_fails_with_tritons_error(server):
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([5], dtype=np.int32))
    with pytest.raises(InferenceServerException) as caught:
        client.infer("third_time_plain", [tensor])
    assert "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE" in caught.value.message()
    assert caught.value.status() == "400"


def test_every_execution_counts_in_the_statistics_as_in_triton(server):
    client = httpclient.InferenceServerClient(server.http_url)

    def counts():
        stats = client.get_inference_statistics("countdown")["model_stats"][0]
        return (
            stats["inference_count"],
            stats["execution_count"],
            *(stats["inference_stats"][k]["count"] for k in ("success", "fail", "queue")),
        )

    before = counts()
    stream = Stream(server.grpc_url)
    try:
        stream.send("countdown", 3)
        stream.until_final()
    finally:
        stream.close()
    # Three executions of one request: three inferences, executions, successes and queue
    # waits (Triton also counts one failure, from the internal request that ends the sequence).
    assert [a - b for a, b in zip(counts(), before)] == [3, 3, 3, 0, 3]


def test_a_cancelled_request_frees_its_slot(server):
    """The client goes away mid-sequence: the request ends and the model's only slot takes
    the next sequence."""
    stream = Stream(server.grpc_url)
    stream.send("countdown", 10_000)
    assert _value(stream.received.get(timeout=30), "OUT") == 9_999
    stream.client.stop_stream(cancel_requests=True)
    stream.client.close()
    stream = Stream(server.grpc_url)
    try:
        stream.send("countdown", 2)
        assert [_value(r, "OUT") for r in stream.until_final()] == [1, 0]
    finally:
        stream.close()
