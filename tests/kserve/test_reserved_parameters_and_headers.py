"""Triton's L0_parameters over both protocols with tritonclient: header forwarding patterns
in the RE2 syntax Triton's users write (case-insensitive unless the pattern says `(?-i)`),
the reserved parameter and header names refused, and the cap on classification."""

from __future__ import annotations

import json
import os
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from naiad.protos import grpc_service_pb2 as pb
from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parent.parent

MODELS = {
    "parameters": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_STRING dims:[1]}]
parameters {key:"op" value {string_value:"echo_parameters"}}""",
    "identity": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]""",
}

HEADERS = {"header_1": "value_1", "my_header_1": "my_value_1", "my_header_2": 'a "quoted" value\\ '}
FORWARDED = {"my_header_1": "my_value_1", "my_header_2": 'a "quoted" value\\ '}


def _server(tmp_path_factory: pytest.TempPathFactory, pattern: str) -> ServerProcess:
    repo = tmp_path_factory.mktemp("parameters")
    for name, config in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(config)
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return ServerProcess(
        repo,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--http-header-forward-pattern",
        pattern,
        "--grpc-header-forward-pattern",
        pattern,
        env={"PYTHONPATH": pythonpath},
    )


@pytest.fixture(scope="module")
def upper_case(tmp_path_factory):
    """Patterns in upper case: Triton matches them against lower-case header names."""
    with _server(tmp_path_factory, "MY_HEADER.*") as process:
        yield process


@pytest.fixture(scope="module")
def case_sensitive(tmp_path_factory):
    """RE2's `(?-i)`, which Python's `re` alone refuses (the server once failed to start)."""
    with _server(tmp_path_factory, "(?-i)MY_HEADER.*") as process:
        yield process


def _fp32(module, values=(1.0,)):
    tensor = module.InferInput("INPUT0", [len(values)], "FP32")
    tensor.set_data_from_numpy(np.asarray(values, np.float32))
    return [tensor]


def _echoed(module, url, headers, parameters=None):
    """The parameters the model saw, for one request over each way tritonclient sends."""
    client = module.InferenceServerClient(url)
    result = client.infer("parameters", _fp32(module), headers=dict(headers), parameters=parameters)
    return json.loads(result.as_numpy("OUTPUT0").reshape(-1)[0])


def _stream_echoed(url, headers):
    answers: list = []
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: answers.append((result, error)), headers=dict(headers))
    client.async_stream_infer("parameters", _fp32(grpcclient))
    client.stop_stream()
    ((result, error),) = answers
    assert error is None, error
    return json.loads(result.as_numpy("OUTPUT0").reshape(-1)[0])


def test_an_upper_case_pattern_forwards_lower_case_headers(upper_case):
    assert _echoed(httpclient, upper_case.http_url, HEADERS) == FORWARDED
    assert _echoed(grpcclient, upper_case.grpc_url, HEADERS) == FORWARDED
    assert _stream_echoed(upper_case.grpc_url, HEADERS) == FORWARDED
    # A parameter the request sets itself wins over a forwarded header of its name.
    mine = _echoed(httpclient, upper_case.http_url, HEADERS, {"my_header_1": "own"})
    assert mine == {**FORWARDED, "my_header_1": "own"}


def test_a_case_sensitive_re2_pattern_is_accepted_and_matches_by_case(case_sensitive):
    assert _echoed(httpclient, case_sensitive.http_url, HEADERS) == {}
    assert _echoed(grpcclient, case_sensitive.grpc_url, HEADERS) == {}
    assert _stream_echoed(case_sensitive.grpc_url, HEADERS) == {}


@pytest.mark.parametrize(
    "name",
    [
        "sequence_id",
        "sequence_start",
        "sequence_end",
        "priority",
        "timeout",
        "headers",
        "binary_data_output",
        "triton_enable_empty_final_response",
        "triton_injected_via_header",
    ],
)
def test_a_header_named_as_a_reserved_parameter_is_refused(upper_case, name):
    body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
    raw = httpx.post(f"http://{upper_case.http_url}/v2/models/parameters/infer", json=body, headers={name: "x"})
    assert raw.status_code == 400
    assert raw.json() == {"error": f"header '{name}' is reserved for Triton usage and cannot be used as a parameter"}
    for module, url, status in (
        (httpclient, upper_case.http_url, "400"),
        (grpcclient, upper_case.grpc_url, "StatusCode.INVALID_ARGUMENT"),
    ):
        with pytest.raises(InferenceServerException) as info:
            _echoed(module, url, {name: "x"})
        assert info.value.status() == status and "reserved for Triton usage" in info.value.message()


@pytest.mark.parametrize("name", ["triton_", "triton_enable_empty_final_response", "triton_anything"])
def test_a_triton_parameter_is_refused(upper_case, name):
    body = {
        "parameters": {name: "x"},
        "inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1.0]}],
    }
    raw = httpx.post(f"http://{upper_case.http_url}/v2/models/parameters/infer", json=body)
    assert raw.status_code == 400
    assert raw.json() == {"error": f"parameter '{name}' is reserved for Triton usage and cannot be specified"}
    if name != "triton_enable_empty_final_response":  # the one tritonclient's gRPC streams send
        # tritonclient refuses these itself: the request goes as raw protobuf.
        message = pb.ModelInferRequest(model_name="parameters")
        message.parameters[name].bool_param = True
        tensor = message.inputs.add(name="INPUT0", datatype="FP32", shape=[1])
        tensor.contents.fp32_contents.append(1.0)
        with grpc.insecure_channel(upper_case.grpc_url) as channel:
            infer = channel.unary_unary(
                "/inference.GRPCInferenceService/ModelInfer",
                request_serializer=pb.ModelInferRequest.SerializeToString,
                response_deserializer=pb.ModelInferResponse.FromString,
            )
            with pytest.raises(grpc.RpcError) as info:
                infer(message, timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details() == f"parameter '{name}' is reserved for Triton usage and cannot be specified"


def test_classification_asks_for_at_most_a_million_classes(upper_case):
    for module, url in ((httpclient, upper_case.http_url), (grpcclient, upper_case.grpc_url)):
        client = module.InferenceServerClient(url)
        top = client.infer(
            "identity",
            _fp32(module, (0.5, 2.0)),
            outputs=[module.InferRequestedOutput("OUTPUT0", class_count=1_000_000)],
        )
        assert [v.decode() if isinstance(v, bytes) else v for v in top.as_numpy("OUTPUT0").tolist()] == [
            "2.000000:1",
            "0.500000:0",
        ]
        too_many = [module.InferRequestedOutput("OUTPUT0", class_count=1_000_001)]
        with pytest.raises(InferenceServerException) as info:
            client.infer("identity", _fp32(module), outputs=too_many)
        assert "at most 1000000" in info.value.message()


@pytest.mark.parametrize(
    "pattern, matching, other",
    [
        ("MY_HEADER.*", "my_header_1", "header_1"),
        ("(?-i)my_.*", "my_header", "MY_HEADER"),
        ("^x-(?-i)T", "x-T", "x-t"),
        ("(a(?-i)B)c", "ABC", "Abc"),  # the flag ends with its group: `c` is again any case
        ("[(?i)]x", "(X", "zx"),  # inside a class, `(?i)` is only characters
        ("end\\z", "the end", "end of it"),
        ("(?i)upper", "UPPER", "lower"),
    ],
)
def test_re2_patterns_read_as_re2_reads_them(pattern, matching, other):
    from naiad.frontends.kserve.header_pattern import compile_header_pattern

    compiled = compile_header_pattern(pattern, "--flag")
    assert compiled.search(matching) and not compiled.search(other)


@pytest.mark.parametrize(
    "pattern, words",
    [("(?U)a+", "the flag 'U' of '(?U)' in '(?U)a+' is not supported"), ("a(", "invalid regular expression 'a('")],
)
def test_a_pattern_python_cannot_read_is_a_clear_error(pattern, words):
    from naiad.frontends.kserve.header_pattern import compile_header_pattern

    with pytest.raises(ValueError) as info:
        compile_header_pattern(pattern, "--grpc-header-forward-pattern")
    assert str(info.value).startswith("--grpc-header-forward-pattern: ") and words in str(info.value)
