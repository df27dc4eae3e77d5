"""Behaviour a Triton model.py relies on, through `tritonclient` against `naiad serve`
(issue 23): the names of `triton_python_backend_utils`, a clean `sys.argv`, concurrent
coroutines of a decoupled `async def execute`, the response sender's rules with Triton's
messages, and bytes wherever the API takes a string.

The argv, the async timings and the sender's rules and messages were first tried on the real
Triton server (shared/bench/triton.sh, the python_backend stub of the nvidia-pytriton wheel)
with models doing the same; the names come from python_backend's source (see TRITON_MODULE)."""

from __future__ import annotations

import json
import queue
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tritonclient.grpc")
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

from naiad.testing import ServerProcess  # noqa: E402

PARITY_MODELS = Path(__file__).parent / "parity_models"
MODES = ("process", "in_process", "inline")
# Models also served in other execution modes, as <name>_<mode> (process is the plain name).
OTHER_MODES = {
    "async_sleep": MODES[1:],
    "sender_rules": MODES[1:],
    "sender_rules_decoupled": MODES[1:],
    "bls_cancel": ("in_process",),
}  # inline refuses blocking BLS (exec) by design

# The public names of Triton's `triton_python_backend_utils` as a model sees them, from
# triton-inference-server/python_backend at f9088ff: the functions, classes and constants of
# src/resources/triton_python_backend_utils.py (with its imports json, np, struct), the names
# Stub::StubSetup/Initialize in src/pb_stub.cc set on the module (TritonError, ..., load_model,
# unload_model, is_model_ready, get_model_dir), and the members the stub binds in
# PYBIND11_EMBEDDED_MODULE(c_python_backend_utils). Classes a model only reaches through a
# method (the response sender, the BLS response iterator, the trace) are listed by that name.
TRITON_MODULE = {
    "InferenceRequest",
    "InferenceResponse",
    "Logger",
    "MetricFamily",
    "ModelConfig",
    "PreferredMemory",
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_model_dir",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "json",
    "load_model",
    "np",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "struct",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
}
TRITON_CLASSES = {
    "InferenceRequest": {
        "async_exec",
        "correlation_id",
        "exec",
        "flags",
        "get_response_sender",
        "inputs",
        "is_cancelled",
        "parameters",
        "request_id",
        "requested_output_names",
        "set_flags",
        "set_release_flags",
        "timeout",
        "trace",
    },
    "InferenceResponse": {"error", "has_error", "output_tensors", "parameters"},
    "InferenceResponseSender": {"is_cancelled", "send"},
    "InferenceTrace": {"get_context"},
    "Logger": {
        "ERROR",
        "INFO",
        "LogLevel",
        "VERBOSE",
        "WARNING",
        "log",
        "log_error",
        "log_info",
        "log_verbose",
        "log_warn",
    },
    "Logger.LogLevel": {"ERROR", "INFO", "VERBOSE", "WARNING"},
    "MetricFamily": {"COUNTER", "GAUGE", "HISTOGRAM", "Metric"},
    "ModelConfig": {
        "add_input",
        "add_output",
        "as_dict",
        "set_dynamic_batching",
        "set_max_batch_size",
        "set_model_transaction_policy",
    },
    "PreferredMemory": set(),
    "ResponseIterator": {"cancel"},
    "Tensor": {"as_numpy", "from_dlpack", "is_cpu", "name", "shape", "to_dlpack", "triton_dtype"},
    "TritonError": {
        "ALREADY_EXISTS",
        "CANCELLED",
        "INTERNAL",
        "INVALID_ARG",
        "NOT_FOUND",
        "UNAVAILABLE",
        "UNKNOWN",
        "UNSUPPORTED",
        "code",
        "message",
    },
    "TritonModelException": set(),
}
# Triton names naiad does not offer, each explained in docs/backends/python.md.
DOCUMENTED_DIFFERENCES: set[str] = set()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repository = tmp_path_factory.mktemp("parity")
    for model in PARITY_MODELS.iterdir():
        shutil.copytree(model, repository / model.name)
    for name, modes in OTHER_MODES.items():
        for mode in modes:
            variant = repository / f"{name}_{mode}"
            shutil.copytree(PARITY_MODELS / name, variant)
            with open(variant / "config.pbtxt", "a") as config:
                config.write(f'parameters {{ key: "execution_mode" value: {{ string_value: "{mode}" }} }}\n')
    # A model that fails to load fails its own tests only.
    with ServerProcess(repository, "--exit-on-error=false") as running:
        yield running


def variant(name: str, mode: str) -> str:
    return name if mode == "process" else f"{name}_{mode}"


def text_input(module, name: str, value: bytes):
    tensor = module.InferInput(name, [1], "BYTES")
    tensor.set_data_from_numpy(np.array([value], dtype=np.object_))
    return tensor


def delay_input(module, seconds: float):
    tensor = module.InferInput("DELAY", [1], "FP32")
    tensor.set_data_from_numpy(np.array([seconds], dtype=np.float32))
    return tensor


def wait_for_log(server, text: str, timeout: float = 10, seen_before: int = 0) -> str:
    """Wait until the server log holds `text` more than `seen_before` times."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = server.log()
        if log.count(text) > seen_before:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never reached the server log")


# -- item 1: pb_utils names, Logger levels -----------------------------------------------------


@pytest.fixture(scope="module")
def report(server):
    client = httpclient.InferenceServerClient(server.http_url)
    result = client.infer("pb_utils_api", [text_input(httpclient, "IN", b"x")])
    return json.loads(result.as_numpy("OUT")[0])


def test_every_triton_pb_utils_name_is_there(report):
    naiad_module = set(report["module"])
    missing = TRITON_MODULE - naiad_module - DOCUMENTED_DIFFERENCES
    assert not missing, f"pb_utils lacks Triton's {sorted(missing)}"
    for cls, triton_members in TRITON_CLASSES.items():
        naiad_members = set(report["classes"][cls])
        missing = {m for m in triton_members - naiad_members if f"{cls}.{m}" not in DOCUMENTED_DIFFERENCES}
        assert not missing, f"pb_utils.{cls} lacks Triton's {sorted(missing)}"


def test_logger_levels_are_tritons(server, report):
    assert report["levels"] == [0, 1, 2, 3]
    assert report["classes"]["Logger.LogLevel"] == ["INFO", "WARNING", "ERROR", "VERBOSE"]
    assert "pb_utils_api initializing" in wait_for_log(server, "pb_utils_api initializing")


def test_get_model_dir_is_the_version_directory(report):
    assert Path(report["model_dir"]).parts[-2:] == ("pb_utils_api", "1")


# -- item 2: a clean process -------------------------------------------------------------------


def test_model_code_sees_tritons_command_line(report):
    # Triton's stub embeds an interpreter with no arguments: sys.argv is [""].
    assert report["argv"] == [""]
    assert report["argparse"] == {}
    assert report["unittest"] == [1, True]


# -- item 3: concurrent coroutines of a decoupled async execute --------------------------------


def stream_timings(url: str, model: str, delays: list[float]) -> list[tuple[str, float]]:
    """(request id, seconds after the first send) of each answer, in arrival order."""
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: answers.put((time.monotonic(), result, error)))
    try:
        started = time.monotonic()
        for number, delay in enumerate(delays):
            client.async_stream_infer(model, [delay_input(grpcclient, delay)], request_id=str(number))
        arrived = []
        for _ in delays:
            at, result, error = answers.get(timeout=30)
            assert error is None, error
            arrived.append((result.get_response().id, at - started))
        return arrived
    finally:
        client.stop_stream()
        client.close()


@pytest.mark.parametrize("model", [variant("async_sleep", mode) for mode in MODES] + ["bls_async_sleep"])
def test_async_decoupled_coroutines_run_together(server, model):
    # 2 s requests and then a short one on one stream to one instance: one after another
    # they would take over 6 s; Triton answers the short one first and all within about 2 s.
    # (bls_async_sleep awaits a BLS call to sleep_sync, which has four instances.)
    delays = [2, 2, 2, 0.1] if model == "bls_async_sleep" else [2, 2, 2, 2, 0.1]
    arrived = stream_timings(server.grpc_url, model, delays)
    assert arrived[0][0] == str(len(delays) - 1), arrived
    assert sorted(request_id for request_id, _ in arrived) == [str(n) for n in range(len(delays))]
    assert max(seconds for _, seconds in arrived) < 5, arrived


# -- item 4: the response sender's rules -------------------------------------------------------

# case -> (what the client gets, the error the model sees or None)
NON_DECOUPLED_CASES = {
    "two_responses": ("first", "Unable to send response. Non-decoupled model cannot send more than one response."),
    "send_and_return": ("sent", "Unable to send response. Non-decoupled model cannot send more than one response."),
    "final_before_response": (
        "returned",
        "Unable to send response. Non-decoupled model cannot send complete final before sending a response.",
    ),
    "send_after_final": ("sent", "Unable to send response. Response sender has been closed."),
    "unsupported_flag": ("returned", "Unable to send response. Unsupported flag provided."),
    "no_response_no_flag": (
        "returned",
        "Inference Response object must be provided when the response flags is set to zero.",
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(NON_DECOUPLED_CASES))
def test_non_decoupled_sender_rules(server, mode, case):
    expected, seen = NON_DECOUPLED_CASES[case]
    model = variant("sender_rules", mode)
    client = httpclient.InferenceServerClient(server.http_url)
    result = client.infer(model, [text_input(httpclient, "CASE", case.encode())])
    assert result.as_numpy("OUT")[0] == expected.encode()
    if case == "send_and_return":
        # Returned after sending: the model has finished, so the error goes to the log.
        wait_for_log(
            server, f"Failed to process the request(s) for model '{model}' instance '{model}_0', message: {seen}"
        )
    else:
        wait_for_log(server, f"model '{model}' instance '{model}_0': CASE {case}: {seen}")


@pytest.mark.parametrize("mode", MODES)
def test_decoupled_execute_returning_a_value_is_an_error(server, mode):
    model = variant("sender_rules_decoupled", mode)
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        client.async_stream_infer(model, [text_input(grpcclient, "CASE", b"return_value")])
        result, error = answers.get(timeout=10)
        assert error is None and result.as_numpy("OUT")[0] == b"sent"
        result, error = answers.get(timeout=10)
        assert result is None
        assert str(error) == (
            f"Failed to process the request(s) for model '{model}' instance '{model}_0', "
            f"message: Python model '{model}_0' is using the decoupled mode and the execute "
            "function must return None."
        )
    finally:
        client.stop_stream()
        client.close()


@pytest.mark.parametrize("mode", MODES)
def test_decoupled_send_after_final_is_an_error_the_model_sees(server, mode):
    model = variant("sender_rules_decoupled", mode)
    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        client.async_stream_infer(
            model, [text_input(grpcclient, "CASE", b"send_after_final")], enable_empty_final_response=True
        )
        result, error = answers.get(timeout=10)
        assert error is None and result.as_numpy("OUT")[0] == b"sent"
        assert result.get_response().parameters["triton_final_response"].bool_param
        wait_for_log(
            server,
            f"model '{model}' instance '{model}_0': CASE send_after_final: "
            "Unable to send response. Response sender has been closed.",
        )
        with pytest.raises(queue.Empty):
            answers.get(timeout=0.5)  # the late response went nowhere
    finally:
        client.stop_stream()
        client.close()


# -- item 13: bytes wherever Triton's stub takes a string --------------------------------------


def test_bls_model_name_and_other_strings_as_bytes(server):
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = [text_input(httpclient, "MODEL_NAME", b"sleep_sync"), delay_input(httpclient, 0.0)]
    result = client.infer("bls_bytes", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUT"), [1.0])
    wait_for_log(server, "bls_bytes calls sleep_sync")
    # An unknown model named in bytes is reported by its name, not by the bytes' repr.
    inputs[0] = text_input(httpclient, "MODEL_NAME", b"no_such_model")
    with pytest.raises(Exception) as caught:
        client.infer("bls_bytes", inputs)
    assert "'no_such_model'" in str(caught.value) and "b'no_such_model'" not in str(caught.value)


# -- the model loading API (item 1's names) ----------------------------------------------------


def act(client, action: str) -> str:
    return client.infer("model_loader", [text_input(httpclient, "ACTION", action.encode())]).as_numpy("OUT")[0].decode()


def test_model_loading_api_needs_explicit_mode(server):
    client = httpclient.InferenceServerClient(server.http_url)
    assert act(client, "ready:async_sleep") == "True"
    assert act(client, "ready:no_such_model") == "False"
    answer = act(client, "unload:async_sleep")
    assert answer.startswith("error: ") and "--model-control-mode=explicit" in answer
    assert client.is_model_ready("async_sleep")


def test_model_loading_api_loads_and_unloads(tmp_path):
    for name in ("model_loader", "async_sleep"):
        shutil.copytree(PARITY_MODELS / name, tmp_path / name)
    with ServerProcess(tmp_path, "--model-control-mode", "explicit", "--load-model", "model_loader") as running:
        client = httpclient.InferenceServerClient(running.http_url)
        assert act(client, "ready:async_sleep") == "False"
        assert act(client, "load:async_sleep") == "done"
        assert client.is_model_ready("async_sleep") and act(client, "ready:async_sleep") == "True"
        assert act(client, "unload:async_sleep") == "done"
        assert not client.is_model_ready("async_sleep")
        # A model from a config and files the loading model sends.
        assert act(client, "load_files:doubler") == "done"
        tensor = httpclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(np.array([3], dtype=np.float32))
        np.testing.assert_array_equal(client.infer("doubler", [tensor]).as_numpy("OUT"), [6])
        assert act(client, "load:no_such_model").startswith("error: ")


# -- cancelling a BLS stream (ResponseIterator.cancel) ------------------------------------------


@pytest.mark.parametrize("mode", ("process", "in_process"))
def test_bls_stream_cancel_reaches_the_called_model(server, mode):
    cancelled_before = server.log().count("ticker cancelled after")
    client = httpclient.InferenceServerClient(server.http_url)
    count = httpclient.InferInput("COUNT", [1], "INT32")
    count.set_data_from_numpy(np.array([100], dtype=np.int32))  # 10 s of ticks
    started = time.monotonic()
    result = client.infer(variant("bls_cancel", mode), [count])
    assert time.monotonic() - started < 5
    assert result.as_numpy("SEEN")[0] == 1
    assert result.as_numpy("LAST")[0] == b"request was cancelled"
    wait_for_log(server, "ticker cancelled after", seen_before=cancelled_before)
