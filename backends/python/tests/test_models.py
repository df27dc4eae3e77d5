"""Models written exactly as Triton documents them, served through the in-process Server."""

from __future__ import annotations

import json

import numpy as np
import pytest
from python_backend_servers import bytes_array

from naiad import ErrorCode
from naiad.backend.helpers import GRPC_STATUS_NAME, HTTP_STATUS


def test_add_sub_fp32_batched(served):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.5, dtype=np.float32)
    response = served.infer("add_sub_fp32", {"INPUT0": a, "INPUT1": b})
    out = {t.name: t for t in response.outputs}
    assert out["OUTPUT0"].datatype == "FP32" and out["OUTPUT0"].shape == (2, 4)
    np.testing.assert_array_equal(out["OUTPUT0"].data, a + b)
    np.testing.assert_array_equal(out["OUTPUT1"].data, a - b)


def test_add_sub_takes_dtypes_from_config(served):
    a = np.array([1, 2, 3, 4], dtype=np.int32)
    b = np.array([10, 20, 30, 40], dtype=np.int32)
    response = served.infer("add_sub_int32", {"INPUT0": a, "INPUT1": b}, outputs=["OUTPUT1"])
    assert [t.name for t in response.outputs] == ["OUTPUT1"]
    assert response.outputs[0].datatype == "INT32"
    np.testing.assert_array_equal(response.outputs[0].data, a - b)


@pytest.mark.parametrize("model", ["add_sub_in_process", "add_sub_inline"])
def test_in_process_modes_give_the_same_answers(served, model):
    a = np.arange(4, dtype=np.float32)[None]
    response = served.infer(model, {"INPUT0": a, "INPUT1": a})
    np.testing.assert_array_equal(response.output("OUTPUT0").data, a * 2)
    np.testing.assert_array_equal(response.output("OUTPUT1").data, a * 0)


def test_string_identity_round_trips_arbitrary_bytes(served):
    values = bytes_array(b"hello", "d\u00e9j\u00e0 vu".encode(), b"", b"\x00\xff\x00")
    response = served.infer("string_identity", {"INPUT0": values})
    out = response.output("OUTPUT0")
    assert out.datatype == "BYTES" and out.shape == (4,)
    assert list(out.data) == list(values)


def test_optional_input_present_and_absent(served):
    a = np.array([1, 2], dtype=np.float32)
    with_both = served.infer("optional_input", {"INPUT0": a, "INPUT1": a})
    np.testing.assert_array_equal(with_both.output("OUTPUT0").data, [2, 4])
    only_required = served.infer("optional_input", {"INPUT0": a})
    np.testing.assert_array_equal(only_required.output("OUTPUT0").data, [10, 20])


# (TritonError code, naiad code, HTTP status, gRPC status), as the real Triton answers.
TRITON_CODES = [
    (0, ErrorCode.UNKNOWN, 400, "UNKNOWN"),
    (1, ErrorCode.INTERNAL, 500, "INTERNAL"),
    (2, ErrorCode.NOT_FOUND, 404, "NOT_FOUND"),
    (3, ErrorCode.INVALID_ARG, 400, "INVALID_ARGUMENT"),
    (4, ErrorCode.UNAVAILABLE, 503, "UNAVAILABLE"),
    (5, ErrorCode.UNSUPPORTED, 501, "UNIMPLEMENTED"),
    (6, ErrorCode.ALREADY_EXISTS, 400, "ALREADY_EXISTS"),
    (7, ErrorCode.CANCELLED, 400, "CANCELLED"),
]


@pytest.mark.parametrize("number,code,http,grpc", TRITON_CODES)
def test_triton_error_code_reaches_the_client(served, number, code, http, grpc):
    error = served.infer_error("error_codes", {"CODE": np.array([number], dtype=np.int32)})
    assert error.code is code
    assert error.message == f"error with code {number}"
    assert HTTP_STATUS[error.code] == http
    assert GRPC_STATUS_NAME[error.code] == grpc


def test_model_keeps_serving_after_an_error_response(served):
    served.infer_error("error_codes", {"CODE": np.array([3], dtype=np.int32)})
    response = served.infer("error_codes", {"CODE": np.array([-1], dtype=np.int32)})
    np.testing.assert_array_equal(response.output("OUT").data, [-1])


def test_initialize_args_are_tritons(served):
    response = served.infer(
        "init_args", {"IN": np.array([1], dtype=np.int32)}, id="req-7", parameters={"custom": "x", "count": 3}
    )
    args = json.loads(response.output("ARGS").data[0])
    config = json.loads(args["model_config"])
    assert config == served.server.model_config("init_args").to_json_dict()
    assert config["name"] == "init_args" and config["backend"] == "python"
    assert config["input"][0]["dims"] == [1]  # numbers, as Triton writes them
    assert args["model_instance_kind"] == "CPU"
    assert args["model_instance_name"] in ("init_args_0_0", "init_args_0_1")
    assert args["model_instance_device_id"] == "0"
    assert args["model_name"] == "init_args" and args["model_version"] == "1"
    assert args["model_repository"].endswith("/models/init_args")
    assert args["request_id"] == "req-7"
    assert args["parameters"] == {"custom": "x", "count": 3}
    assert args["requested_output_names"] == ["ARGS"]
    assert args["is_cancelled"] is False
    assert response.parameters == {"from_model": "yes"}


def test_sequence_fields_become_request_flags_and_correlation_id(served):
    response = served.infer(
        "init_args", {"IN": np.array([1], dtype=np.int32)}, parameters={"sequence_id": 42, "sequence_start": True}
    )
    args = json.loads(response.output("ARGS").data[0])
    assert args["correlation_id"] == 42
    assert args["flags"] == 1  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START


def test_each_instance_is_its_own_process(served):
    """instance_group count 2: two processes, each answering for its own instance."""
    import os

    from python_backend_servers import make_request

    runners = served.server.model("init_args").runners
    assert len(runners) == 2
    answers = []
    for runner in runners:
        [response] = served.run(
            runner.instance.execute([make_request("init_args", {"IN": np.array([1], dtype=np.int32)})])
        )
        answers.append(json.loads(response.outputs[0].data[0]))
    pids = {answer["pid"] for answer in answers}
    assert len(pids) == 2 and os.getpid() not in pids
    assert sorted(a["model_instance_name"] for a in answers) == ["init_args_0_0", "init_args_0_1"]


def test_auto_complete_config_fills_in_the_config(served):
    config = served.server.model_config("auto_complete")
    assert config.max_batch_size == 4
    assert [(s.name, s.datatype, s.dims) for s in config.inputs] == [("INPUT0", "FP32", (2,))]
    response = served.infer("auto_complete", {"INPUT0": np.array([[1, 2]], dtype=np.float32)})
    np.testing.assert_array_equal(response.output("OUTPUT0").data, [[2, 4]])


def test_a_batch_of_requests_gets_one_response_each_in_order(served):
    """What a dynamic batcher hands an instance: several requests in one execute."""
    from python_backend_servers import make_request

    instance = served.server.model("error_codes").runners[0].instance
    requests = [make_request("error_codes", {"CODE": np.array([c], dtype=np.int32)}) for c in (-1, 2, -1, 4)]
    responses = served.run(instance.execute(requests))
    assert len(responses) == 4
    assert responses[0].error is None and list(responses[0].output("OUT").data) == [-1]
    assert responses[1].error.code is ErrorCode.NOT_FOUND
    assert responses[2].error is None
    assert responses[3].error.code is ErrorCode.UNAVAILABLE
