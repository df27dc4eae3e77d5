"""Every bad request gets Triton's status and a JSON body naming the fault, and the server
keeps serving afterwards."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

ADD_SUB = "/v2/models/add_sub/infer"


def tensor(name: str, shape: list[int], datatype: str = "FP32", **extra):
    count = int(np.prod(shape))
    return {"name": name, "shape": shape, "datatype": datatype, "data": list(range(count)), **extra}


GOOD = [tensor("INPUT0", [1, 4]), tensor("INPUT1", [1, 4])]


def binary_body(inputs: list[dict], payload: bytes, extra: dict | None = None) -> tuple[bytes, dict[str, str]]:
    header = json.dumps({"inputs": inputs, **(extra or {})}).encode()
    return header + payload, {"Inference-Header-Content-Length": str(len(header))}


def binary_input(name: str, size: int, shape=(1, 4)) -> dict:
    return {"name": name, "shape": list(shape), "datatype": "FP32", "parameters": {"binary_data_size": size}}


# A JSON array nested as deep as orjson reads (1024 levels); Python's repr recurses per level.
DEEP = b"[" * 1000 + b"]" * 1000
DEEP_OBJECT = b'{"a": ' * 1000 + b"1" + b"}" * 1000

# (case, path, JSON document or (raw body, headers), status, words the message must contain)
CASES = [
    ("unknown model", "/v2/models/nosuch/infer", {"inputs": GOOD}, 404, ["unknown model", "nosuch"]),
    ("unknown version", "/v2/models/add_sub/versions/7/infer", {"inputs": GOOD}, 404, ["add_sub", "version 7"]),
    ("unknown input", ADD_SUB, {"inputs": GOOD + [tensor("INPUT9", [1, 4])]}, 400, ["INPUT9", "add_sub"]),
    (
        "missing input",
        ADD_SUB,
        {"inputs": GOOD[:1]},
        400,
        [
            "expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."
        ],
    ),
    (
        "duplicate input",
        ADD_SUB,
        {"inputs": GOOD + GOOD[:1]},
        400,
        ["input 'INPUT0' already exists in request", "more than once"],
    ),
    (
        "wrong datatype",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [1, 4], "INT32"), GOOD[1]]},
        400,
        ["INPUT0", "INT32", "FP32"],
    ),
    (
        "unknown datatype",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [1, 4], "FLOAT"), GOOD[1]]},
        400,
        ["INPUT0", "unknown datatype 'FLOAT'"],
    ),
    (
        "wrong shape",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [1, 5]), tensor("INPUT1", [1, 5])]},
        400,
        [
            "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,4], got [1,5]. NOTE: Setting a non-zero"
        ],
    ),
    (
        "missing batch dimension",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [4]), tensor("INPUT1", [4])]},
        400,
        ["INPUT0", "[4]"],
    ),
    (
        "batch over max_batch_size",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [9, 4]), tensor("INPUT1", [9, 4])]},
        400,
        ["batch-size must be <= 8", "9"],
    ),
    (
        "negative dimension",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [1, 4]) | {"shape": [-1, 4]}, GOOD[1]]},
        400,
        ["INPUT0", "negative"],
    ),
    (
        "data count does not match shape",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [1, 4]) | {"data": [1, 2, 3]}, GOOD[1]]},
        400,
        ["INPUT0", "needs 4 elements", "holds 3"],
    ),
    (
        "data of the wrong kind",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [1, 4]) | {"data": ["a", "b", "c", "d"]}, GOOD[1]]},
        400,
        ["INPUT0", "FP32 data must be numbers"],
    ),
    (
        "ragged nested data",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [2, 2]) | {"data": [[1, 2], [3]]}, GOOD[1]]},
        400,
        ["INPUT0", "ragged"],
    ),
    (
        "no data",
        ADD_SUB,
        {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32"}, GOOD[1]]},
        400,
        ["INPUT0", "exactly one of", "none of them"],
    ),
    (
        "data and binary_data_size",
        ADD_SUB,
        {"inputs": [tensor("INPUT0", [1, 4], parameters={"binary_data_size": 16}), GOOD[1]]},
        400,
        ["INPUT0", "'data' and 'binary_data_size'"],
    ),
    (
        "missing shape",
        ADD_SUB,
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "data": [1]}]},
        400,
        ["INPUT0", "'shape'"],
    ),
    (
        "missing name",
        ADD_SUB,
        {"inputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]},
        400,
        ["inputs[0]", "'name'"],
    ),
    ("no inputs", ADD_SUB, {"id": "x"}, 400, ["'inputs'"]),
    ("id not a string", ADD_SUB, {"id": 5, "inputs": GOOD}, 400, ["'id'", "string"]),
    ("unknown output", ADD_SUB, {"inputs": GOOD, "outputs": [{"name": "NOPE"}]}, 400, ["NOPE", "add_sub"]),
    (
        "negative classification",
        ADD_SUB,
        {"inputs": GOOD, "outputs": [{"name": "OUTPUT0", "parameters": {"classification": -1}}]},
        400,
        ["OUTPUT0", "classification"],
    ),
    ("malformed JSON", ADD_SUB, (b'{"inputs": [', {}), 400, ["malformed JSON"]),
    ("JSON that is not an object", ADD_SUB, (b"[1, 2]", {}), 400, ["JSON object"]),
    (
        "binary byte size does not match shape",
        ADD_SUB,
        binary_body([binary_input("INPUT0", 12), binary_input("INPUT1", 16)], bytes(28)),
        400,
        ["input byte size mismatch for input 'INPUT0' for model 'add_sub'. Expected 16, got 12"],
    ),
    (
        "binary data shorter than declared",
        ADD_SUB,
        binary_body([binary_input("INPUT0", 16), binary_input("INPUT1", 16)], bytes(20)),
        400,
        ["INPUT1", "only 4 bytes"],
    ),
    (
        "binary data longer than declared",
        ADD_SUB,
        binary_body([binary_input("INPUT0", 16), binary_input("INPUT1", 16)], bytes(36)),
        400,
        ["4 bytes of binary data after the last"],
    ),
    (
        "header length past the body",
        ADD_SUB,
        (b'{"inputs": []}', {"Inference-Header-Content-Length": "5000"}),
        400,
        ["Inference-Header-Content-Length is 5000", "14 bytes"],
    ),
    (
        "header length not a number",
        ADD_SUB,
        (b'{"inputs": []}', {"Inference-Header-Content-Length": "abc"}),
        400,
        ["Inference-Header-Content-Length", "'abc'"],
    ),
    # Found by tests/security/test_fuzz.py: a 1000-deep value in a message's repr was a 500
    # naming RecursionError.
    (
        "request id nested deeply",
        ADD_SUB,
        (b'{"id": ' + DEEP + b', "inputs": []}', {}),
        400,
        ["the request 'id' must be a string, got [[[[...]]]]"],
    ),
    (
        "shape nested deeply",
        ADD_SUB,
        (b'{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": ' + DEEP + b', "data": [1]}]}', {}),
        400,
        ["input 'INPUT0' needs a 'shape' list of integers, got [[[[...]]]]"],
    ),
    (
        "BYTES element nested deeply",
        "/v2/models/types/infer",
        (
            b'{"inputs": [{"name": "INPUT13", "datatype": "BYTES", "shape": [1, 1], "data": [' + DEEP_OBJECT + b"]}]}",
            {},
        ),
        400,
        ["input 'INPUT13': BYTES data in JSON must be strings, got {'a': {'a': {'a': {...}}}}"],
    ),
    (
        "more dimensions than a tensor may have",
        ADD_SUB,
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [0] * 40, "data": []}, GOOD[1]]},
        400,
        ["input 'INPUT0': shape has 40 dimensions; a tensor has at most 32"],
    ),
    (
        "unsupported Content-Encoding",
        ADD_SUB,
        (b'{"inputs": []}', {"Content-Encoding": "br"}),
        415,
        ["unsupported Content-Encoding 'br'; use gzip or deflate"],
    ),
    (
        "unknown shared memory region",
        ADD_SUB,
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [1, 4],
                    "datatype": "FP32",
                    "parameters": {"shared_memory_region": "nope", "shared_memory_byte_size": 16},
                },
                GOOD[1],
            ]
        },
        404,
        ["'nope'"],
    ),
]


@pytest.mark.parametrize("case,path,body,status,words", CASES, ids=[c[0] for c in CASES])
def test_bad_request(base_url, case, path, body, status, words):
    if isinstance(body, tuple):
        content, headers = body
        response = httpx.post(base_url + path, content=content, headers=headers)
    else:
        response = httpx.post(base_url + path, json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    message = response.json()["error"]
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    # Still serving.
    ok = httpx.post(base_url + ADD_SUB, json={"inputs": GOOD})
    assert ok.status_code == 200


@pytest.mark.parametrize("path", [ADD_SUB, "/v2/repository/index"])
def test_unsupported_content_encoding_is_415_as_in_triton(base_url, path):
    """Triton answers a body it cannot decompress with 415 and the encodings it reads; it
    was a 501 here, a server error for a client's choice. The infer route (naiad's direct
    path) and the ASGI app's routes answer alike."""
    response = httpx.post(base_url + path, content=b"{}", headers={"Content-Encoding": "zstd"})
    assert response.status_code == 415, response.text
    assert response.headers["accept-encoding"] == "gzip, deflate"
    assert response.json() == {"error": "unsupported Content-Encoding 'zstd'; use gzip or deflate"}
    assert httpx.post(base_url + ADD_SUB, json={"inputs": GOOD}).status_code == 200


def test_body_over_the_size_limit(base_url):
    # The session server runs with --http-max-input-size 1048576; its Content-Length says the
    # body is larger, so naiad's HTTP/1.1 server refuses it at the head (Triton: 400, later).
    response = httpx.post(base_url + ADD_SUB, content=b" " * (1024 * 1024 + 1))
    assert response.status_code == 413
    assert "--http-max-input-size" in response.json()["error"] and "1048576" in response.json()["error"]
    assert httpx.post(base_url + ADD_SUB, json={"inputs": GOOD}).status_code == 200


def test_streamed_body_over_the_size_limit(base_url):
    """A chunked body (no Content-Length) is cut off once it passes the limit."""

    def chunks():
        for _ in range(20):
            yield b" " * 65536

    response = httpx.post(base_url + ADD_SUB, content=chunks())
    assert response.status_code == 413
    assert "--http-max-input-size" in response.json()["error"]


def test_unknown_path_and_wrong_method(base_url):
    response = httpx.get(base_url + "/v2/nothing")
    assert response.status_code == 404 and response.json() == {"error": "Not Found"}
    response = httpx.get(base_url + ADD_SUB)
    assert response.status_code == 405 and response.json() == {"error": "Method Not Allowed"}
    # A version must be a number: anything else is no route at all, as in Triton.
    assert httpx.get(base_url + "/v2/models/add_sub/versions/x").status_code == 404


def test_tritonclient_sees_status_and_message(server):
    client = httpclient.InferenceServerClient(server.http_url)
    infer_input = httpclient.InferInput("INPUT0", [1, 3], "FP32")
    infer_input.set_data_from_numpy(np.zeros((1, 3), np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("add_sub", [infer_input])
    assert info.value.status() == "400"
    assert info.value.message() == (
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) "
        "['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all required input(s)."
    )
    with pytest.raises(InferenceServerException) as info:
        client.get_model_metadata("nosuch")
    assert info.value.status() == "404" and "nosuch" in info.value.message()


def test_version_zero_is_not_the_default_version(base_url):
    response = httpx.get(base_url + "/v2/models/add_sub/versions/0")
    assert response.status_code == 404 and "version 0" in response.json()["error"]
    response = httpx.post(base_url + "/v2/models/add_sub/versions/0/infer", json={"inputs": GOOD})
    assert response.status_code == 404


def test_paths_that_are_not_infer_routes(base_url):
    for path in ("/v2/models/a/b/infer", "/v2/models//infer", "/v2/models/add_sub/versions/x/infer"):
        response = httpx.post(base_url + path, json={"inputs": GOOD})
        assert response.status_code == 404 and response.json() == {"error": "Not Found"}, path
