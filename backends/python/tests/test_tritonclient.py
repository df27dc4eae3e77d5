"""End to end through `tritonclient` against `naiad serve`: skipped until the HTTP and gRPC
frontends (built in parallel) are importable, so they run after the merge.

Set PYTHON_BACKEND_E2E_HTTP and PYTHON_BACKEND_E2E_GRPC (host:port) to run the same checks
against another server serving tests/models, e.g. the real Triton (shared/bench/triton.sh):
that is how the expected answers and statuses here were confirmed."""

from __future__ import annotations

import importlib.util
import os
import queue
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
from python_backend_servers import MODELS

EXTERNAL = os.environ.get("PYTHON_BACKEND_E2E_HTTP"), os.environ.get("PYTHON_BACKEND_E2E_GRPC")

pytestmark = pytest.mark.skipif(
    not all(EXTERNAL)
    and (
        importlib.util.find_spec("naiad.frontends.http") is None
        or importlib.util.find_spec("naiad.frontends.grpc") is None
    ),
    reason="naiad.frontends.http/grpc are not installed yet",
)

# TritonError code -> (HTTP status, gRPC status name), as Triton's frontends answer.
CODES = {
    0: (400, "UNKNOWN"),
    1: (500, "INTERNAL"),
    2: (404, "NOT_FOUND"),
    3: (400, "INVALID_ARGUMENT"),
    4: (503, "UNAVAILABLE"),
    5: (501, "UNIMPLEMENTED"),
    6: (400, "ALREADY_EXISTS"),
    7: (400, "CANCELLED"),
}


@pytest.fixture(scope="module")
def naiad_server():
    if all(EXTERNAL):
        yield SimpleNamespace(http_url=EXTERNAL[0], grpc_url=EXTERNAL[1])
        return
    from naiad.testing import ServerProcess

    models = [
        "add_sub_fp32",
        "add_sub_flat",
        "error_codes",
        "repeat_decoupled",
        "string_identity",
        "optional_input",
        "bls_sync",
        "bls_async",
        "bls_decoupled_sync",
        "misbehaving",
        "sender_after_return",
        "gather_decoupled",
        "bls_decoupled_gather",
        "bls_decoupled_gather_in_process",
    ]
    flags = [flag for name in models for flag in ("--load-model", name)]
    with ServerProcess(MODELS, "--model-control-mode", "explicit", *flags) as server:
        yield server


def test_add_sub_over_http_and_grpc(naiad_server):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), dtype=np.float32)
    for module, url in ((httpclient, naiad_server.http_url), (grpcclient, naiad_server.grpc_url)):
        client = module.InferenceServerClient(url)
        inputs = [module.InferInput("INPUT0", [2, 4], "FP32"), module.InferInput("INPUT1", [2, 4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        result = client.infer("add_sub_fp32", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def test_string_identity_over_http(naiad_server):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(naiad_server.http_url)
    values = np.array([b"a", b"\x00bc", "\u00e9".encode()], dtype=np.object_)
    tensor = httpclient.InferInput("INPUT0", [3], "BYTES")
    tensor.set_data_from_numpy(values)
    result = client.infer("string_identity", [tensor])
    assert list(result.as_numpy("OUTPUT0")) == list(values)


@pytest.mark.parametrize("code", sorted(CODES))
def test_triton_error_codes_map_to_http_and_grpc_statuses(naiad_server, code):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    http_status, grpc_status = CODES[code]
    for module, url, expected in (
        (httpclient, naiad_server.http_url, str(http_status)),
        (grpcclient, naiad_server.grpc_url, f"StatusCode.{grpc_status}"),
    ):
        client = module.InferenceServerClient(url)
        tensor = module.InferInput("CODE", [1], "INT32")
        tensor.set_data_from_numpy(np.array([code], dtype=np.int32))
        with pytest.raises(InferenceServerException) as caught:
            client.infer("error_codes", [tensor])
        assert f"error with code {code}" in caught.value.message()
        assert caught.value.status() == expected


def test_decoupled_responses_stream_in_order_over_grpc(naiad_server):
    import tritonclient.grpc as grpcclient

    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(naiad_server.grpc_url)
    client.start_stream(callback=partial(lambda q, result, error: q.put((result, error)), responses))
    try:
        tensor = grpcclient.InferInput("IN", [4], "INT32")
        tensor.set_data_from_numpy(np.array([4, 3, 2, 1], dtype=np.int32))
        client.async_stream_infer("repeat_decoupled", [tensor], enable_empty_final_response=True)
        received = []
        while True:
            result, error = responses.get(timeout=30)
            assert error is None
            response = result.get_response()
            if response.outputs:
                received.append(int(result.as_numpy("OUT")[0]))
            if (
                response.parameters.get("triton_final_response")
                and response.parameters["triton_final_response"].bool_param
            ):
                break
        assert received == [4, 3, 2, 1]
    finally:
        client.stop_stream()


def _http_infer(url, model, inputs):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url)
    tensors = []
    for name, (array, datatype) in inputs.items():
        tensor = httpclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return client.infer(model, tensors)


def test_optional_input_over_http(naiad_server):
    a = np.array([1, 2], dtype=np.float32)
    both = _http_infer(naiad_server.http_url, "optional_input", {"INPUT0": (a, "FP32"), "INPUT1": (a, "FP32")})
    np.testing.assert_array_equal(both.as_numpy("OUTPUT0"), [2, 4])
    one = _http_infer(naiad_server.http_url, "optional_input", {"INPUT0": (a, "FP32")})
    np.testing.assert_array_equal(one.as_numpy("OUTPUT0"), [10, 20])


def test_bls_sync_async_and_decoupled_over_http(naiad_server):
    a = np.array([1, 2, 3, 4], dtype=np.float32)
    b = np.array([10, 20, 30, 40], dtype=np.float32)
    name = np.array([b"add_sub_flat"], dtype=np.object_)
    result = _http_infer(
        naiad_server.http_url, "bls_sync", {"INPUT0": (a, "FP32"), "INPUT1": (b, "FP32"), "MODEL_NAME": (name, "BYTES")}
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    result = _http_infer(naiad_server.http_url, "bls_async", {"INPUT0": (a, "FP32"), "INPUT1": (b, "FP32")})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("SUM"), [10])
    for items in ([], [4], [1, 2, 3]):
        result = _http_infer(
            naiad_server.http_url, "bls_decoupled_sync", {"IN": (np.array(items, dtype=np.int32), "INT32")}
        )
        assert int(result.as_numpy("COUNT")[0]) == len(items) and int(result.as_numpy("SUM")[0]) == sum(items)


def test_bls_error_reaches_the_client_as_internal(naiad_server):
    from tritonclient.utils import InferenceServerException

    a = np.ones(4, dtype=np.float32)
    with pytest.raises(InferenceServerException) as caught:
        _http_infer(
            naiad_server.http_url,
            "bls_sync",
            {
                "INPUT0": (a, "FP32"),
                "INPUT1": (a, "FP32"),
                "MODEL_NAME": (np.array([b"no_such_model"], dtype=np.object_), "BYTES"),
            },
        )
    assert caught.value.status() == "500"
    assert "no_such_model" in caught.value.message()


def test_execute_that_raises_over_http_and_grpc(naiad_server):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    mode = np.array([b"raise"], dtype=np.object_)
    with pytest.raises(InferenceServerException) as caught:
        _http_infer(naiad_server.http_url, "misbehaving", {"MODE": (mode, "BYTES")})
    assert caught.value.status() == "500"
    assert caught.value.message().startswith("Failed to process the request(s) for model")
    assert "ValueError: the model raised on purpose" in caught.value.message()
    client = grpcclient.InferenceServerClient(naiad_server.grpc_url)
    tensor = grpcclient.InferInput("MODE", [1], "BYTES")
    tensor.set_data_from_numpy(mode)
    with pytest.raises(InferenceServerException) as caught:
        client.infer("misbehaving", [tensor])
    assert caught.value.status() == "StatusCode.INTERNAL"


@pytest.mark.parametrize("items", [[], [9], [5, 6, 7]])
def test_decoupled_zero_one_many_over_grpc(naiad_server, items):
    import tritonclient.grpc as grpcclient

    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(naiad_server.grpc_url)
    client.start_stream(callback=partial(lambda q, result, error: q.put((result, error)), responses))
    try:
        tensor = grpcclient.InferInput("IN", [len(items)], "INT32")
        tensor.set_data_from_numpy(np.array(items, dtype=np.int32))
        client.async_stream_infer("repeat_decoupled", [tensor], enable_empty_final_response=True)
        received = []
        while True:
            result, error = responses.get(timeout=30)
            assert error is None
            response = result.get_response()
            if response.outputs:
                received.append(int(result.as_numpy("OUT")[0]))
            final = response.parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                break
        assert received == items
    finally:
        client.stop_stream()


def test_a_non_decoupled_model_may_answer_through_the_sender_after_execute_returned(naiad_server):
    """Triton's response_sender tests: execute returns None, a thread sends the response and
    the final flag later."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    values = np.array([1, 2, 3], dtype=np.int32)
    for module, url in ((httpclient, naiad_server.http_url), (grpcclient, naiad_server.grpc_url)):
        client = module.InferenceServerClient(url)
        tensor = module.InferInput("INPUT0", [3], "INT32")
        tensor.set_data_from_numpy(values)
        result = client.infer("sender_after_return", [tensor])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values * 2)


@pytest.mark.parametrize("caller", ["bls_decoupled_gather", "bls_decoupled_gather_in_process"])
def test_concurrent_decoupled_async_exec_calls_iterated_with_a_plain_for_run_together(naiad_server, caller):
    """Four `await async_exec(decoupled=True)` calls gathered in one `async def execute`,
    each read with a plain `for`: the called model answers only when all four are in
    flight at once (else each call ends with an error after its wait)."""
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(naiad_server.http_url, network_timeout=120)
    for round_id in (1, 2):
        tensor = httpclient.InferInput("ROUND", [1], "INT32")
        # Rounds apart for each caller: the called model counts arrivals per round.
        tensor.set_data_from_numpy(np.array([round_id + 10 * len(caller)], dtype=np.int32))
        result = client.infer(caller, [tensor])
        assert result.as_numpy("ARRIVED").tolist() == [4, 4, 4, 4]
