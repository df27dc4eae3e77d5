"""What every object store must do as a model repository, run against each store's emulator
(test_gcs_repository.py, test_azure_repository.py) through a real `naiad serve` and
tritonclient: load at start, explicit load and unload, poll mode following a new version, a
changed config and a removed model, and a store that becomes unreachable.

A store is anything with `put(key, data)`, `delete(key)`, `url` (the repository's URL) and
`env` (what the server's environment needs to reach it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import numpy as np
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

__all__ = ["Store", "upload_repository", "PY_CONFIG", "ONNX_CONFIG", "wait_until", "infer", "python_model"]

PY_CONFIG = b"""backend: "python" max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]"""

ONNX_CONFIG = b"""platform: "onnxruntime_onnx" max_batch_size: 0 version_policy: { all: {} }
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]"""


class Store(Protocol):
    url: str
    env: dict[str, str]

    def put(self, key: str, data: bytes) -> None: ...

    def delete(self, key: str) -> None: ...


def python_model(offset: float) -> bytes:
    """A Triton model.py answering INPUT0 + offset: the offset tells which version answered."""
    return f"""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() + {offset})]
            )
            for r in requests
        ]
""".encode()


def onnx_model(offset: float) -> bytes:
    """An ONNX graph answering INPUT0 + offset."""
    import onnx  # noqa: PLC0415 - only the tests that serve ONNX need it
    from onnx import TensorProto, helper  # noqa: PLC0415

    graph = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "OFFSET"], ["OUTPUT0"])],
        "add_offset",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [4])],
        [helper.make_tensor("OFFSET", TensorProto.FLOAT, [1], [offset])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model).SerializeToString()


def upload_repository(store: Store, prefix: str = "repo") -> None:
    """`py` (Python, versions 1 and 2, the latest served) and `onnx` (ONNX, versions 1 and 2,
    both served)."""
    store.put(f"{prefix}/py/config.pbtxt", PY_CONFIG)
    store.put(f"{prefix}/onnx/config.pbtxt", ONNX_CONFIG)
    for version in (1, 2):
        store.put(f"{prefix}/py/{version}/model.py", python_model(version))
        store.put(f"{prefix}/onnx/{version}/model.onnx", onnx_model(10 * version))


def infer(client: httpclient.InferenceServerClient, model: str, version: str = "") -> list[float]:
    data = np.zeros(4, np.float32)
    tensor = httpclient.InferInput("INPUT0", [4], "FP32")
    tensor.set_data_from_numpy(data)
    result = client.infer(model, [tensor], model_version=version)
    return result.as_numpy("OUTPUT0").tolist()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {what}")


def serves_and_follows_the_store(store: Store, extra_env: dict[str, str]) -> None:
    """Poll mode: loads both models at start, then follows a new version, a changed config
    and a removed model."""
    upload_repository(store)
    env = {**store.env, **extra_env}
    with ServerProcess(
        "--model-repository", store.url, "--model-control-mode", "poll", "--repository-poll-secs", "0.3", env=env
    ) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_server_ready()
        assert infer(client, "py") == [2.0] * 4
        assert infer(client, "onnx", "1") == [10.0] * 4
        assert infer(client, "onnx", "2") == [20.0] * 4

        store.put("repo/py/3/model.py", python_model(3))
        wait_until(lambda: client.is_model_ready("py", "3"), "version 3 of py ready")
        assert infer(client, "py") == [3.0] * 4

        store.put(
            "repo/onnx/config.pbtxt",
            ONNX_CONFIG + b'\nparameters { key: "store" value: { string_value: "changed" } }',
        )
        wait_until(
            lambda: client.get_model_config("onnx").get("parameters", {}).get("store") == {"string_value": "changed"},
            "the changed config of onnx served",
        )
        assert infer(client, "onnx", "2") == [20.0] * 4

        for key in ("repo/py/config.pbtxt", "repo/py/1/model.py", "repo/py/2/model.py", "repo/py/3/model.py"):
            store.delete(key)
        wait_until(lambda: not client.is_model_ready("py"), "py unloaded once removed from the store")
        ready = [
            (row["name"], row.get("version"))
            for row in client.get_model_repository_index()
            if row.get("state") == "READY"
        ]
        assert ready == [("onnx", "1"), ("onnx", "2")]
        assert client.is_model_ready("onnx") and client.is_server_ready()


def loads_and_unloads_explicitly(store: Store, extra_env: dict[str, str]) -> None:
    """Explicit mode: `--load-model` at start; a model put in the store afterwards is found by
    a load request; unload."""
    store.put("repo/onnx/config.pbtxt", ONNX_CONFIG)
    store.put("repo/onnx/1/model.onnx", onnx_model(10))
    env = {**store.env, **extra_env}
    with ServerProcess(
        "--model-repository", store.url, "--model-control-mode", "explicit", "--load-model", "onnx", env=env
    ) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert infer(client, "onnx") == [10.0] * 4
        assert not client.is_model_ready("py")
        store.put("repo/py/config.pbtxt", PY_CONFIG)
        store.put("repo/py/1/model.py", python_model(1))
        client.load_model("py")
        assert infer(client, "py") == [1.0] * 4
        client.unload_model("py")
        wait_until(lambda: not client.is_model_ready("py"), "py unloaded")
        assert infer(client, "onnx") == [10.0] * 4


def keeps_serving_while_the_store_is_away(store: Store, proxy, extra_env: dict[str, str]) -> None:  # noqa: ANN001
    """Poll mode with the store gone: the model keeps serving, readiness stays, the failure
    is logged once; when the store is back that is logged once and polling goes on."""
    upload_repository(store)
    env = {**store.env, **extra_env}
    flags = ("--model-control-mode", "poll", "--repository-poll-secs", "0.2", "--repository-timeout-secs", "2")
    with ServerProcess("--model-repository", store.url, *flags, env=env) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert infer(client, "py") == [2.0] * 4
        proxy.down()
        wait_until(lambda: "poll: cannot list model repository" in server.log(), "the failed poll logged")
        time.sleep(2.0)  # ten poll intervals and more
        assert server.log().count("poll: cannot list model repository") == 1, server.log()
        assert client.is_server_ready() and client.is_model_ready("py")
        assert infer(client, "py") == [2.0] * 4
        proxy.up()
        wait_until(lambda: "poll: the model repositories answer again" in server.log(), "the recovery logged")
        store.put("repo/py/3/model.py", python_model(3))
        wait_until(lambda: client.is_model_ready("py", "3"), "polling goes on after the store is back")
        assert server.log().count("poll: the model repositories answer again") == 1
