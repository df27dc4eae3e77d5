"""A binary request whose JSON header the server has decoded before is built from that
decoding (codec.py keeps it): every request still gets its own data, parameters and
checks, exactly as if its header had been parsed again."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.http as httpclient

from naiad.errors import NaiadError
from naiad.frontends.http import codec
from naiad.shared_memory import SharedMemoryRegistry


def body(header: dict, *arrays: np.ndarray) -> tuple[bytes, str]:
    encoded = json.dumps(header).encode()
    return encoded + b"".join(a.tobytes() for a in arrays), str(len(encoded))


def binary_header(**request_parameters) -> dict:
    inputs = [
        {"name": f"INPUT{i}", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 16}}
        for i in range(2)
    ]
    header = {"inputs": inputs, "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    if request_parameters:
        header["parameters"] = request_parameters
    return header


def decode(data: bytes, header_length: str):
    return codec.decode_infer_request(data, header_length, "add_sub", "", SharedMemoryRegistry())


def test_a_repeated_header_gives_each_request_its_own_data_and_parameters():
    header = binary_header(priority=1, binary_data_output=True)
    first_body, length = body(header, np.zeros((1, 4), np.float32), np.ones((1, 4), np.float32))
    second_body, _ = body(header, np.full((1, 4), 7, np.float32), np.full((1, 4), 8, np.float32))
    first, first_binary = decode(first_body, length)
    second, second_binary = decode(second_body, length)

    assert first_binary is second_binary is True
    assert [t.name for t in second.inputs] == ["INPUT0", "INPUT1"]
    np.testing.assert_array_equal(first.inputs[0].data, np.zeros((1, 4), np.float32))
    np.testing.assert_array_equal(second.inputs[0].data, np.full((1, 4), 7, np.float32))
    np.testing.assert_array_equal(second.inputs[1].data, np.full((1, 4), 8, np.float32))
    assert second.parameters == {"priority": 1}
    assert second.outputs[0].parameters == {"binary_data": True}
    # What one request's handling changes (the server takes its control parameters out of
    # the dict) does not reach the next one.
    first.take_control_parameters()
    second.parameters["extra"] = 1
    second.outputs[0].parameters["binary_data"] = False
    third, _ = decode(second_body, length)
    assert third.parameters == {"priority": 1}
    assert third.outputs[0].parameters == {"binary_data": True}
    assert third.parameters is not second.parameters


def test_a_repeated_header_with_the_wrong_amount_of_binary_data_is_refused_as_the_first_time():
    header = binary_header()
    good, length = body(header, np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32))
    decode(good, length)
    with pytest.raises(NaiadError, match="binary_data_size is 16, but only 12 bytes"):
        decode(good[:-4], length)
    with pytest.raises(NaiadError, match="4 bytes of binary data after the last binary input"):
        decode(good + b"\0" * 4, length)


def test_a_header_with_json_data_is_parsed_every_time():
    header = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.5]}]}
    data = json.dumps(header).encode()
    kept = dict(codec._templates)
    request, _ = decode(data, None)
    assert codec._templates == kept
    np.testing.assert_array_equal(request.inputs[0].data, [1.5])


def test_the_kept_headers_are_bounded():
    for index in range(codec._TEMPLATE_COUNT + 20):
        data, length = body(binary_header(tag=index), np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32))
        decode(data, length)
    assert len(codec._templates) == codec._TEMPLATE_COUNT
    long_header = binary_header(tag="x" * codec._TEMPLATE_MAX_BYTES)
    too_long, length = body(long_header, np.zeros((1, 4), np.float32), np.ones((1, 4), np.float32))
    kept = dict(codec._templates)
    request, _ = decode(too_long, length)
    assert codec._templates == kept
    np.testing.assert_array_equal(request.inputs[1].data, np.ones((1, 4), np.float32))


def test_tritonclient_binary_requests_with_one_header_get_their_own_answers(server):
    client = httpclient.InferenceServerClient(server.http_url)
    for value in range(5):
        a = np.full((1, 4), value, np.float32)
        b = np.arange(4, dtype=np.float32).reshape(1, 4)
        inputs = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
        inputs[0].set_data_from_numpy(a, binary_data=True)
        inputs[1].set_data_from_numpy(b, binary_data=True)
        outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUTPUT0", "OUTPUT1")]
        result = client.infer("add_sub", inputs, outputs=outputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    client.close()
