"""The KServe layer both protocols share, tested once on plain values: what each request
becomes, and the exact words of every refusal (the HTTP and gRPC tests check the same
words reach clients over their wire)."""

from __future__ import annotations

import re

import pytest

from naiad.errors import NaiadError
from naiad.frontends.kserve.infer_parameters import (
    forward_headers,
    take_binary_data_output,
    take_empty_final_response,
)
from naiad.frontends.kserve.repository_requests import (
    IndexRequest,
    LoadRequest,
    UnloadRequest,
    index_request,
    load_request,
    unload_request,
)
from naiad.frontends.kserve.shared_memory_requests import RegisterRequest, region_selector, register_request

POLL = "failed to load 'm', failed to poll from model repository: "


@pytest.mark.parametrize("ready, expected", [(True, IndexRequest(True)), (False, IndexRequest(False))])
def test_index_request(ready, expected):
    assert index_request(ready) == expected
    assert index_request() == IndexRequest(False)


@pytest.mark.parametrize(
    "ready, message",
    [
        ("yes", "'ready' must be true or false, got 'yes'"),
        (1, "'ready' must be true or false, got 1"),
    ],
)
def test_bad_index_request(ready, message):
    with pytest.raises(NaiadError) as info:
        index_request(ready)
    assert (info.value.code.name, info.value.message) == ("INVALID_ARG", message)


@pytest.mark.parametrize(
    "parameters, expected",
    [
        ({}, LoadRequest("m", None, {})),
        ({"config": '{"max_batch_size": 4}'}, LoadRequest("m", {"max_batch_size": 4}, {})),
        ({"config": b'{"backend": "onnx"}'}, LoadRequest("m", {"backend": "onnx"}, {})),
        ({"config": {"backend": "onnx"}}, LoadRequest("m", {"backend": "onnx"}, {})),
        ({"file:1/model.onnx": b"\x00\x01", "other": 3}, LoadRequest("m", None, {"1/model.onnx": b"\x00\x01"})),
    ],
)
def test_load_request(parameters, expected):
    assert load_request("m", parameters) == expected


@pytest.mark.parametrize(
    "parameters, code, message",
    [
        (
            {"file:1/model.onnx": "AAE="},
            "INVALID_ARG",
            "failed to load 'm': parameter 'file:1/model.onnx' must carry the file as bytes",
        ),
        ({"file:x": None}, "INVALID_ARG", "failed to load 'm': parameter 'file:x' must carry the file as bytes"),
        ({"config": "{not json"}, "INTERNAL", POLL + "the 'config' parameter is not valid JSON: "),
        (
            {"config": "[1, 2]"},
            "INTERNAL",
            POLL + "the 'config' parameter must be a JSON object in the model configuration's JSON form",
        ),
        (
            {"config": 7},
            "INTERNAL",
            POLL + "the 'config' parameter must be a JSON object in the model configuration's JSON form",
        ),
    ],
)
def test_bad_load_request(parameters, code, message):
    with pytest.raises(NaiadError) as info:
        load_request("m", parameters)
    assert info.value.code.name == code
    assert info.value.message.startswith(message)


@pytest.mark.parametrize(
    "parameters, expected",
    [
        ({}, UnloadRequest("m", False)),
        ({"unload_dependents": True}, UnloadRequest("m", True)),
        ({"unload_dependents": False, "other": "x"}, UnloadRequest("m", False)),
    ],
)
def test_unload_request(parameters, expected):
    assert unload_request("m", parameters) == expected


@pytest.mark.parametrize("value", ["true", 1, None])
def test_bad_unload_request(value):
    with pytest.raises(NaiadError) as info:
        unload_request("m", {"unload_dependents": value})
    assert info.value.message == "'unload_dependents' of the unload request must be true or false"


@pytest.mark.parametrize(
    "key, offset, byte_size, expected",
    [
        ("/k", 0, 64, RegisterRequest("r", "/k", 0, 64)),
        ("/k", 16, 0, RegisterRequest("r", "/k", 16, 0)),
    ],
)
def test_register_request(key, offset, byte_size, expected):
    assert register_request("r", key, offset, byte_size) == expected


@pytest.mark.parametrize(
    "key, offset, byte_size, message",
    [
        (None, 0, 64, "registering shared memory region 'r' needs a 'key' string"),
        (5, 0, 64, "registering shared memory region 'r' needs a 'key' string"),
        ("/k", "0", 64, "registering shared memory region 'r' needs an integer 'offset', got '0'"),
        ("/k", True, 64, "registering shared memory region 'r' needs an integer 'offset', got True"),
        ("/k", 0, None, "registering shared memory region 'r' needs an integer 'byte_size', got None"),
        ("/k", 0, 1.5, "registering shared memory region 'r' needs an integer 'byte_size', got 1.5"),
    ],
)
def test_bad_register_request(key, offset, byte_size, message):
    with pytest.raises(NaiadError) as info:
        register_request("r", key, offset, byte_size)
    assert (info.value.code.name, info.value.message) == ("INVALID_ARG", message)


@pytest.mark.parametrize("name, expected", [(None, None), ("", None), ("r", "r")])
def test_region_selector(name, expected):
    assert region_selector(name) == expected


@pytest.mark.parametrize(
    "parameters, expected, left",
    [
        ({}, False, {}),
        ({"binary_data_output": True, "x": 1}, True, {"x": 1}),
        ({"binary_data_output": False}, False, {}),
    ],
)
def test_binary_data_output(parameters, expected, left):
    assert take_binary_data_output(parameters) is expected
    assert parameters == left


@pytest.mark.parametrize("value", ["true", 1])
def test_bad_binary_data_output(value):
    with pytest.raises(NaiadError) as info:
        take_binary_data_output({"binary_data_output": value})
    assert info.value.message == f"request parameter 'binary_data_output' must be true or false, got {value!r}"


def test_empty_final_response():
    parameters = {"triton_enable_empty_final_response": True, "x": 1}
    assert take_empty_final_response(parameters) is True
    assert parameters == {"x": 1}
    assert take_empty_final_response({}) is False


def test_forward_headers_adds_matching_headers_and_keeps_the_request_own():
    parameters = {"x-trace": "from the request"}
    forward_headers(parameters, re.compile("^x-"), [("x-trace", "header"), ("x-user", "ann"), ("accept", "*/*")])
    assert parameters == {"x-trace": "from the request", "x-user": "ann"}
