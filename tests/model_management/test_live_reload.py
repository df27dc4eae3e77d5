"""Model management over the network, through tritonclient: poll mode under continuous
load, a broken new version, graceful shutdown on SIGTERM."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

TESTS = Path(__file__).resolve().parents[1]
IDENTITY = """backend: "numpy" max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [-1] }]
"""
POLL_SECS = 0.5


def serve(repo: Path, *flags: str) -> ServerProcess:
    return ServerProcess(repo, "--backend-plugin", "numpy_backend:NumpyPlugin", *flags, env={"PYTHONPATH": str(TESTS)})


def add_version(repo: Path, version: int, config: str = IDENTITY) -> None:
    (repo / "m" / str(version)).mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text(config)


def http_infer(client: httpclient.InferenceServerClient) -> str:
    tensor = httpclient.InferInput("INPUT0", [3], "INT32")
    tensor.set_data_from_numpy(np.arange(3, dtype=np.int32))
    result = client.infer("m", [tensor])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), [0, 1, 2])
    return result.get_response()["model_version"]


def grpc_infer(client: grpcclient.InferenceServerClient) -> str:
    tensor = grpcclient.InferInput("INPUT0", [3], "INT32")
    tensor.set_data_from_numpy(np.arange(3, dtype=np.int32))
    result = client.infer("m", [tensor])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), [0, 1, 2])
    return result.get_response().model_version


def wait_for(condition, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_new_version_under_continuous_load_fails_no_request(tmp_path):
    add_version(tmp_path, 1)
    with serve(tmp_path, "--model-control-mode", "poll", "--repository-poll-secs", str(POLL_SECS)) as server:
        stop = threading.Event()
        seen: list[str] = []
        failures: list[BaseException] = []

        def client_loop(kind: str) -> None:
            client = (
                httpclient.InferenceServerClient(server.http_url)
                if kind == "http"
                else grpcclient.InferenceServerClient(server.grpc_url)
            )
            infer = http_infer if kind == "http" else grpc_infer
            while not stop.is_set():
                try:
                    seen.append(infer(client))
                except BaseException as exc:  # noqa: BLE001 - every failure is counted, then asserted
                    failures.append(exc)

        clients = [threading.Thread(target=client_loop, args=(kind,)) for kind in ("http", "http", "grpc", "grpc")]
        for thread in clients:
            thread.start()
        wait_for(lambda: len(seen) > 20, "requests on version 1")
        add_version(tmp_path, 2)
        index = httpclient.InferenceServerClient(server.http_url)
        wait_for(
            lambda: {"name": "m", "version": "2", "state": "READY"} in index.get_model_repository_index(),
            "version 2 to load",
        )
        # The load has finished: the next request already goes to version 2.
        assert http_infer(index) == "2"
        count = len(seen)
        wait_for(lambda: len(seen) > count + 20, "requests on version 2")
        stop.set()
        for thread in clients:
            thread.join()
        assert failures == []
        assert seen[0] == "1" and seen[-1] == "2"
        assert index.get_model_metadata("m")["versions"] == ["2"]


def test_broken_new_version_leaves_the_old_one_serving(tmp_path):
    add_version(tmp_path, 1)
    with serve(tmp_path, "--model-control-mode", "explicit", "--load-model", "m") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        add_version(tmp_path, 2, IDENTITY + "max_batch_size: -4\n")
        try:
            client.load_model("m")
        except Exception as exc:  # noqa: BLE001 - the refusal is the point
            assert "max_batch_size" in str(exc)
        else:
            raise AssertionError("loading a broken version succeeded")
        assert http_infer(client) == "1"
        assert client.is_model_ready("m")
        (tmp_path / "m" / "config.pbtxt").write_text(IDENTITY)
        client.load_model("m")
        assert http_infer(client) == "2"


def test_sigterm_finishes_in_flight_requests(tmp_path):
    started = tmp_path / "started"
    (tmp_path / "repo" / "m" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "m" / "config.pbtxt").write_text(
        IDENTITY + f'parameters {{ key: "op" value {{ string_value: "sleep" }} }}\n'
        f'parameters {{ key: "sleep_ms" value {{ string_value: "1000" }} }}\n'
        f'parameters {{ key: "started_file" value {{ string_value: "{started}" }} }}\n'
    )
    server = serve(tmp_path / "repo").start()
    try:
        answers: list[str] = []
        request = threading.Thread(
            target=lambda: answers.append(
                http_infer(httpclient.InferenceServerClient(server.http_url, network_timeout=60))
            )
        )
        request.start()
        wait_for(started.exists, "the request to start executing")
        server.process.send_signal(signal.SIGTERM)
        request.join()
        assert answers == ["1"]
        assert server.wait(60) == 0
        assert "finishing in-flight requests" in server.log()
    finally:
        server.stop()
