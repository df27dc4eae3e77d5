"""Errors a client sees read as Triton's do, over HTTP and gRPC: the status and the words
clients match on. Each expected text was recorded from tritonserver 2.51 (the binary in
nvidia-pytriton) answering the same request for a model of the same shape; naiad may add
detail only after Triton's words."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

sys.path.insert(0, str(Path(__file__).resolve().parent / "http"))
from http_servers import server_process, write_repository  # noqa: E402

MODELS = {
    # The shapes of ../shared/bench/models, which the texts below were recorded with.
    "add_sub": """backend: "numpy" max_batch_size: 64
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[16]},{name:"INPUT1" data_type: TYPE_FP32 dims:[16]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[16]},{name:"OUTPUT1" data_type: TYPE_FP32 dims:[16]}]
parameters {key:"op" value {string_value:"add_sub"}}""",
    "identity": """backend: "numpy" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]""",
}

NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended "
    "to each input shape. If you want to specify the full shape including the batch dim in your input dims "
    "config, try setting max_batch_size to zero. See the model configuration docs for more info on "
    "max_batch_size."
)
ID = "[request id: <id_unknown>] "


def fp32(module: Any, name: str, shape: tuple[int, ...], datatype: str = "FP32") -> Any:
    tensor = module.InferInput(name, list(shape), datatype)
    tensor.set_data_from_numpy(np.ones(shape, np.float32 if datatype == "FP32" else np.int32))
    return tensor


def both(module: Any, *shapes: tuple[int, ...]) -> list[Any]:
    return [fp32(module, f"INPUT{i}", shape) for i, shape in enumerate(shapes)]


Case = Callable[[Any, Any], object]

# name: (call, Triton's HTTP status, Triton's gRPC code, Triton's message)
CASES: dict[str, tuple[Case, str, str, str]] = {
    "unknown model": (
        lambda m, c: c.infer("nosuch", both(m, (1, 16), (1, 16))),
        "404",
        "NOT_FOUND",
        "Request for unknown model: 'nosuch' is not found",
    ),
    "unknown version": (
        lambda m, c: c.infer("add_sub", both(m, (1, 16), (1, 16)), model_version="7"),
        "404",
        "NOT_FOUND",
        "Request for unknown model: 'add_sub' version 7 is not found",
    ),
    "metadata of an unknown model": (
        lambda m, c: c.get_model_metadata("nosuch"),
        "404",
        "NOT_FOUND",
        "Request for unknown model: 'nosuch' is not found",
    ),
    "config of an unknown model": (
        lambda m, c: c.get_model_config("nosuch"),
        "404",
        "NOT_FOUND",
        "Request for unknown model: 'nosuch' is not found",
    ),
    "missing input": (
        lambda m, c: c.infer("add_sub", both(m, (1, 16))),
        "400",
        "INVALID_ARGUMENT",
        ID + "expected 2 inputs but got 1 inputs for model 'add_sub'. Got input(s) ['INPUT0'], but "
        "missing required input(s) ['INPUT1']. Please provide all required input(s).",
    ),
    "missing input, request id": (
        lambda m, c: c.infer("add_sub", both(m, (1, 16)), request_id="abc"),
        "400",
        "INVALID_ARGUMENT",
        "[request id: abc] expected 2 inputs but got 1 inputs for model 'add_sub'.",
    ),
    "one input too many": (
        lambda m, c: c.infer("add_sub", both(m, (1, 16), (1, 16), (1, 16))),
        "400",
        "INVALID_ARGUMENT",
        ID + "expected 2 inputs but got 3 inputs for model 'add_sub'.",
    ),
    "unexpected input": (
        lambda m, c: c.infer("add_sub", [fp32(m, "INPUT0", (1, 16)), fp32(m, "INPUT9", (1, 16))]),
        "400",
        "INVALID_ARGUMENT",
        "unexpected inference input 'INPUT9' for model 'add_sub'",
    ),
    "wrong datatype": (
        lambda m, c: c.infer("add_sub", [fp32(m, "INPUT0", (1, 16), "INT32"), fp32(m, "INPUT1", (1, 16))]),
        "400",
        "INVALID_ARGUMENT",
        ID + "inference input 'INPUT0' data-type is 'INT32', but model 'add_sub' expects 'FP32'",
    ),
    "wrong shape": (
        lambda m, c: c.infer("add_sub", both(m, (1, 8), (1, 16))),
        "400",
        "INVALID_ARGUMENT",
        ID + "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,16], got [1,8]. " + NOTE,
    ),
    "no batch dimension": (
        lambda m, c: c.infer("add_sub", both(m, (16,), (16,))),
        "400",
        "INVALID_ARGUMENT",
        ID + "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,16], got [16]. " + NOTE,
    ),
    "wrong shape, no batching": (
        lambda m, c: c.infer("identity", both(m, (2, 2))),
        "400",
        "INVALID_ARGUMENT",
        ID + "unexpected shape for input 'INPUT0' for model 'identity'. Expected [-1], got [2,2]. ",
    ),
    "batch too large": (
        lambda m, c: c.infer("add_sub", both(m, (65, 16), (65, 16))),
        "400",
        "INVALID_ARGUMENT",
        ID + "inference request batch-size must be <= 64 for 'add_sub'",
    ),
    "batch sizes differ": (
        lambda m, c: c.infer("add_sub", both(m, (2, 16), (1, 16))),
        "400",
        "INVALID_ARGUMENT",
        ID + "input 'INPUT1' batch size does not match other inputs for 'add_sub'",
    ),
    "unknown output": (
        lambda m, c: c.infer("add_sub", both(m, (1, 16), (1, 16)), outputs=[m.InferRequestedOutput("NOPE")]),
        "400",
        "INVALID_ARGUMENT",
        "unexpected inference output 'NOPE' for model 'add_sub'",
    ),
    "load of an unknown model": (
        lambda m, c: c.load_model("nosuch"),
        "500",
        "INTERNAL",
        "failed to load 'nosuch', failed to poll from model repository",
    ),
    "trace settings of an unknown model": (
        lambda m, c: c.get_trace_settings(model_name="nosuch"),
        "400",
        "INVALID_ARGUMENT",
        "Request for unknown model : nosuch",
    ),
    "cuda shared memory status of an unknown region": (
        lambda m, c: c.get_cuda_shared_memory_status("nosuch"),
        "404",
        "NOT_FOUND",
        "Unable to find cuda shared memory region: 'nosuch'",
    ),
    "statistics of an unknown model": (
        lambda m, c: c.get_inference_statistics("nosuch"),
        "400",
        "INVALID_ARGUMENT",
        "requested model 'nosuch' is not available",
    ),
    "statistics of an unknown version": (
        lambda m, c: c.get_inference_statistics("add_sub", "7"),
        "400",
        "INVALID_ARGUMENT",
        "requested model version is not available for model 'add_sub'",
    ),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("wording"), MODELS)
    process = server_process(repo, "--allow-grpc", "true", "--model-control-mode", "explicit", "--load-model", "*")
    with process.start():
        yield process


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("case", list(CASES))
def test_error_reads_as_tritons(server, case, protocol):
    call, http_status, grpc_code, text = CASES[case]
    if protocol == "http":
        module, client = httpclient, httpclient.InferenceServerClient(server.http_url)
        status = http_status
    else:
        module, client = grpcclient, grpcclient.InferenceServerClient(server.grpc_url)
        status = f"StatusCode.{grpc_code}"
    with pytest.raises(InferenceServerException) as info:
        call(module, client)
    assert info.value.status() == status
    assert info.value.message().startswith(text), info.value.message()


@pytest.mark.parametrize("module", [httpclient, grpcclient])
def test_unloading_a_model_never_loaded_succeeds_as_in_triton(server, module):
    url = server.http_url if module is httpclient else server.grpc_url
    module.InferenceServerClient(url).unload_model("never_loaded")
    assert module.InferenceServerClient(url).is_server_live()
