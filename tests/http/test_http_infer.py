"""Inference over HTTP through tritonclient (sync and aio): JSON and binary tensors in both
directions, every datatype, requested outputs, ids, parameters, classification, compression."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aiohttpclient
from http_servers import DATATYPES
from tritonclient.utils import InferenceServerException

NUMPY = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}


def sample(datatype: str) -> np.ndarray:
    """A 2x3 array of `datatype` with values that exercise its range."""
    if datatype == "BYTES":
        return np.array([[b"a", b"", "wörld".encode()], [b"x" * 40, b"5", b"six"]], dtype=np.object_)
    if datatype == "BOOL":
        return np.array([[True, False, True], [False, False, True]])
    if datatype == "BF16":
        import ml_dtypes

        return np.array([[1.0, -2.5, 0.0], [3.0, 1024.0, -0.125]], dtype=ml_dtypes.bfloat16)
    dtype = np.dtype(NUMPY[datatype])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array([[info.min, 0, 1], [2, info.max - 1, info.max]], dtype=dtype)
    return np.array([[0.5, -1.25, 3.0], [1e3, -7.0, 0.0]], dtype=dtype)


def add_sub_inputs(module, binary: bool = True):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 3, np.float32)
    inputs = [module.InferInput("INPUT0", [2, 4], "FP32"), module.InferInput("INPUT1", [2, 4], "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=binary)
    return a, b, inputs


@pytest.mark.parametrize("binary_in", [False, True])
@pytest.mark.parametrize("binary_out", [False, True])
def test_add_sub_json_and_binary(server, binary_in, binary_out):
    client = httpclient.InferenceServerClient(server.http_url)
    a, b, inputs = add_sub_inputs(httpclient, binary_in)
    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary_out),
        httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary_out),
    ]
    result = client.infer("add_sub", inputs, outputs=outputs, request_id="req-7")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    response = result.get_response()
    assert response["id"] == "req-7"
    assert response["model_name"] == "add_sub" and response["model_version"] == "1"
    for output in response["outputs"]:
        assert output["shape"] == [2, 4] and output["datatype"] == "FP32"
        assert ("binary_data_size" in output.get("parameters", {})) is binary_out


def test_all_outputs_when_none_requested_and_explicit_version(server):
    client = httpclient.InferenceServerClient(server.http_url)
    a, b, inputs = add_sub_inputs(httpclient)
    result = client.infer("add_sub", inputs, model_version="1")
    assert [o["name"] for o in result.get_response()["outputs"]] == ["OUTPUT0", "OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert "id" not in result.get_response()


def test_requested_output_subset(server):
    client = httpclient.InferenceServerClient(server.http_url)
    a, b, inputs = add_sub_inputs(httpclient)
    result = client.infer("add_sub", inputs, outputs=[httpclient.InferRequestedOutput("OUTPUT1")])
    assert [o["name"] for o in result.get_response()["outputs"]] == ["OUTPUT1"]
    assert result.as_numpy("OUTPUT0") is None
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_datatype_round_trips(server, datatype, binary):
    if datatype == "BF16" and not binary:
        pytest.skip("tritonclient sends BF16 only as binary data (JSON BF16 is covered with raw HTTP)")
    client = httpclient.InferenceServerClient(server.http_url)
    index = DATATYPES.index(datatype)
    data = sample(datatype)
    infer_input = httpclient.InferInput(f"INPUT{index}", list(data.shape), datatype)
    infer_input.set_data_from_numpy(data, binary_data=binary)
    output = httpclient.InferRequestedOutput(f"OUTPUT{index}", binary_data=binary)
    result = client.infer("types", [infer_input], outputs=[output])
    got = result.as_numpy(f"OUTPUT{index}")
    assert got.shape == data.shape
    if datatype == "BYTES":
        # JSON carries strings; binary carries bytes (tritonclient decodes neither).
        expected = data if binary else np.array([[v.decode() for v in row] for row in data], dtype=object)
        assert got.tolist() == expected.tolist()
    elif datatype == "BF16":
        np.testing.assert_array_equal(got.astype(np.float32), data.astype(np.float32))
    else:
        assert got.dtype == data.dtype
        np.testing.assert_array_equal(got, data)


def test_nested_json_data_and_mixed_binary_outputs(server):
    """Raw JSON with nested data; one binary and one JSON output in the same response."""
    import httpx

    body = {
        "id": "nested",
        "inputs": [
            {"name": "INPUT0", "shape": [2, 4], "datatype": "FP32", "data": [[1, 2, 3, 4], [5, 6, 7, 8]]},
            {"name": "INPUT1", "shape": [2, 4], "datatype": "FP32", "data": [1, 1, 1, 1, 1, 1, 1, 1]},
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}],
    }
    response = httpx.post(f"http://{server.http_url}/v2/models/add_sub/infer", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/octet-stream"
    length = int(response.headers["Inference-Header-Content-Length"])
    header = json.loads(response.content[:length])
    assert header["id"] == "nested"
    first, second = header["outputs"]
    assert first["parameters"] == {"binary_data_size": 32}
    np.testing.assert_array_equal(np.frombuffer(response.content[length:], np.float32), np.arange(2, 10))
    assert second["data"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_half_precision_in_json(server, datatype):
    """Triton refuses FP16/BF16 in JSON; naiad accepts and returns them as JSON numbers."""
    import httpx

    index = DATATYPES.index(datatype)
    body = {"inputs": [{"name": f"INPUT{index}", "shape": [1, 3], "datatype": datatype, "data": [1.5, -2, 0.25]}]}
    response = httpx.post(f"http://{server.http_url}/v2/models/types/infer", json=body)
    assert response.status_code == 200, response.text
    (output,) = response.json()["outputs"]
    assert output == {"name": f"OUTPUT{index}", "datatype": datatype, "shape": [1, 3], "data": [1.5, -2.0, 0.25]}


def test_request_parameters_reach_the_model(server):
    client = httpclient.InferenceServerClient(server.http_url)
    infer_input = httpclient.InferInput("INPUT0", [1], "INT32")
    infer_input.set_data_from_numpy(np.array([1], np.int32))
    result = client.infer("echo", [infer_input], parameters={"temperature": 0.5, "mode": "fast", "n": 3, "on": True})
    echoed = json.loads(result.as_numpy("OUTPUT0")[0])
    assert echoed == {"mode": "fast", "n": 3, "on": True, "temperature": 0.5}


def test_reserved_parameters_do_not_reach_the_model(server):
    client = httpclient.InferenceServerClient(server.http_url)
    infer_input = httpclient.InferInput("INPUT0", [1], "INT32")
    infer_input.set_data_from_numpy(np.array([1], np.int32))
    result = client.infer("echo", [infer_input], priority=0, timeout=1_000_000, parameters={"k": "v"})
    # `timeout` is a control parameter; binary_data_output steers the frontend.
    assert json.loads(result.as_numpy("OUTPUT0")[0]) == {"k": "v"}


def test_classification_with_labels(server):
    client = httpclient.InferenceServerClient(server.http_url)
    data = np.array([[0.1, 0.9, 0.5, 0.2, 0.3], [5, 4, 3, 2, 1]], np.float32)
    infer_input = httpclient.InferInput("INPUT0", [2, 5], "FP32")
    infer_input.set_data_from_numpy(data)
    for binary in (False, True):
        output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary, class_count=3)
        result = client.infer("classify", [infer_input], outputs=[output])
        classes = result.as_numpy("OUTPUT0")
        assert classes.shape == (2, 3)
        decoded = [[c.decode() if isinstance(c, bytes) else c for c in row] for row in classes]
        # The fifth class has no label: the file holds four lines.
        assert decoded == [
            ["0.900000:1:dog", "0.500000:2:bird", "0.300000:4"],
            ["5.000000:0:cat", "4.000000:1:dog", "3.000000:2:bird"],
        ]


def test_classification_of_integers_without_batching(server):
    client = httpclient.InferenceServerClient(server.http_url)
    infer_input = httpclient.InferInput("INPUT0", [2, 3], "INT32")
    infer_input.set_data_from_numpy(np.array([[1, 9, 3], [4, 5, 6]], np.int32))
    result = client.infer(
        "classify_int",
        [infer_input],
        outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False, class_count=2)],
    )
    assert result.as_numpy("OUTPUT0").tolist() == ["9:1", "6:5"]


def test_compressed_request_and_response(server):
    client = httpclient.InferenceServerClient(server.http_url)
    a, b, inputs = add_sub_inputs(httpclient)
    for algorithm in ("gzip", "deflate"):
        result = client.infer(
            "add_sub", inputs, request_compression_algorithm=algorithm, response_compression_algorithm=algorithm
        )
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)


def test_aio_client_infer_and_metadata(server):
    async def go():
        client = aiohttpclient.InferenceServerClient(server.http_url)
        try:
            assert await client.is_server_live() and await client.is_server_ready()
            assert await client.is_model_ready("add_sub")
            metadata = await client.get_model_metadata("add_sub")
            assert metadata["inputs"][0] == {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}
            a, b, inputs = add_sub_inputs(aiohttpclient)
            results = await asyncio.gather(*(client.infer("add_sub", inputs, request_id=str(i)) for i in range(4)))
            for i, result in enumerate(results):
                assert result.get_response()["id"] == str(i)
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
            with pytest.raises(InferenceServerException, match="unknown model"):
                await client.infer("no_such_model", inputs)
        finally:
            await client.close()

    asyncio.run(go())


def test_model_failure_is_a_500_and_the_server_keeps_serving(server):
    client = httpclient.InferenceServerClient(server.http_url)
    infer_input = httpclient.InferInput("INPUT0", [1], "FP32")
    infer_input.set_data_from_numpy(np.array([1], np.float32))
    with pytest.raises(InferenceServerException, match="failed on purpose") as info:
        client.infer("failing", [infer_input])
    assert info.value.status() == "500"
    a, b, inputs = add_sub_inputs(httpclient)
    np.testing.assert_array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), a + b)


def test_raw_binary_request(base_url):
    """`Inference-Header-Content-Length: 0`: the body is the only input's raw data."""
    import httpx

    raw = {"Inference-Header-Content-Length": "0"}
    response = httpx.post(
        base_url + "/v2/models/identity/infer", content=np.arange(3, dtype=np.float32).tobytes(), headers=raw
    )
    assert response.status_code == 200, response.text
    length = int(response.headers["Inference-Header-Content-Length"])
    header = json.loads(response.content[:length])
    assert header["outputs"] == [
        {"name": "OUTPUT0", "datatype": "FP32", "shape": [3], "parameters": {"binary_data_size": 12}}
    ]
    np.testing.assert_array_equal(np.frombuffer(response.content[length:], np.float32), [0, 1, 2])
    # A batching model gets batch 1 of its config dims.
    response = httpx.post(base_url + "/v2/models/classify/infer", content=bytes(20), headers=raw)
    assert response.status_code == 200, response.text
    assert json.loads(response.content[: int(response.headers["Inference-Header-Content-Length"])])["outputs"][0][
        "shape"
    ] == [1, 5]
    response = httpx.post(base_url + "/v2/models/classify/infer", content=bytes(12), headers=raw)
    assert response.status_code == 400 and "Expected 20, got 12" in response.json()["error"]
    response = httpx.post(base_url + "/v2/models/add_sub/infer", content=bytes(16), headers=raw)
    assert response.status_code == 400 and "Raw request must only have 1 input" in response.json()["error"]
