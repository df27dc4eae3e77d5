"""Raw binary requests (`Inference-Header-Content-Length: 0`): the body is the one input's
data, its shape deduced from the config as Triton deduces it, and refused with Triton's
words (400) where it cannot be."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from http_servers import start_server, write_repository

RAW = {"Inference-Header-Content-Length": "0"}
MODELS = {
    "bytes_one": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_STRING dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[1]}]""",
    "bytes_batched": """backend: "numpy" max_batch_size: 4
input [{name:"INPUT0" data_type: TYPE_STRING dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[1]}]""",
    "bytes_variable": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_STRING dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[-1]}]""",
    "bytes_two": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_STRING dims:[2]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[2]}]""",
    "fp32_two_variable": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1, -1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1, -1]}]""",
    "two_inputs": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[1]},{name:"INPUT1" data_type: TYPE_FP32 dims:[1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[1]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[1]}]""",
}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory):
    process = start_server(write_repository(tmp_path_factory.mktemp("raw"), MODELS))
    yield f"http://{process.http_url}/v2/models"
    process.__exit__()


def _outputs(response: httpx.Response) -> tuple[dict, bytes]:
    assert response.status_code == 200, response.text
    length = int(response.headers["Inference-Header-Content-Length"])
    return json.loads(response.content[:length])["outputs"][0], response.content[length:]


def test_a_bytes_input_of_shape_one_takes_the_body_as_its_element(url):
    output, data = _outputs(httpx.post(f"{url}/bytes_one/infer", content=b"hello", headers=RAW))
    assert output["shape"] == [1] and data == len(b"hello").to_bytes(4, "little") + b"hello"
    output, _ = _outputs(httpx.post(f"{url}/bytes_batched/infer", content=b"hello", headers=RAW))
    assert output["shape"] == [1, 1]


@pytest.mark.parametrize("model, dims", [("bytes_variable", [-1]), ("bytes_two", [2])])
def test_a_bytes_input_of_another_shape_is_refused(url, model, dims):
    response = httpx.post(f"{url}/{model}/infer", content=b"hello", headers=RAW)
    assert response.status_code == 400
    assert response.json()["error"].startswith(
        "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"
    )


def test_shapes_that_cannot_be_deduced_are_refused_in_tritons_words(url):
    body = np.arange(4, dtype=np.float32).tobytes()
    response = httpx.post(f"{url}/fp32_two_variable/infer", content=body, headers=RAW)
    assert response.status_code == 400
    assert response.json()["error"].startswith(
        "The shape of the raw input 'INPUT0' can not be deduced because there are more than one variable-sized "
        "dimension"
    )
    response = httpx.post(f"{url}/two_inputs/infer", content=body, headers=RAW)
    assert response.status_code == 400
    assert response.json()["error"] == (
        "Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'two_inputs' model "
        "configuration"
    )
