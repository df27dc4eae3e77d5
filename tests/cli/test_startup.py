"""`naiad serve` binds its ports before it loads the models: `/v2/health/live` (and gRPC
ServerLive) answers while a slow model loads, readiness stays false until it has, a request
for the model is told it is loading, and a port that is taken fails at once, before any
model's initialize runs."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from slow_model import write_slow_model
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

pytest.importorskip("naiad_backend_python")


def _wait_for(condition, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s}s")
        time.sleep(0.05)


def _live(client) -> bool:
    try:
        return bool(client.is_server_live())
    except Exception:  # noqa: BLE001 - not listening yet
        return False


def _infer(client, module):
    data = np.arange(4, dtype=np.float32).reshape(1, 4)
    infer_input = module.InferInput("INPUT0", [1, 4], "FP32")
    infer_input.set_data_from_numpy(data)
    return client.infer("slow", [infer_input]).as_numpy("OUTPUT0"), data


def _check_while_loading(server: ServerProcess) -> None:
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    _wait_for(lambda: _live(http), "HTTP /v2/health/live answering")
    assert http.is_server_live() is True
    assert http.is_server_ready() is False
    assert grpc.is_server_live() is True
    assert grpc.is_server_ready() is False
    assert http.is_model_ready("slow") is False
    with pytest.raises(InferenceServerException) as refused:
        _infer(http, httpclient)
    assert refused.value.status() == "503"
    assert "model 'slow' is loading" in refused.value.message()
    with pytest.raises(InferenceServerException) as refused_grpc:
        _infer(grpc, grpcclient)
    assert refused_grpc.value.status() == "StatusCode.UNAVAILABLE"
    assert "model 'slow' is loading" in refused_grpc.value.message()
    assert http.get_model_repository_index() == [{"name": "slow", "state": "LOADING"}]
    # A model the repository does not hold is unknown, loading or not.
    unknown = httpclient.InferInput("INPUT0", [1, 4], "FP32")
    unknown.set_data_from_numpy(np.zeros((1, 4), np.float32))
    with pytest.raises(InferenceServerException, match=r"Request for unknown model: 'nope' is not found"):
        http.infer("nope", [unknown])


def _check_after_loading(server: ServerProcess) -> None:
    http = httpclient.InferenceServerClient(server.http_url)
    _wait_for(http.is_server_ready, "readiness once the model loaded")
    assert http.is_model_ready("slow") is True
    output, data = _infer(http, httpclient)
    np.testing.assert_array_equal(output, data)


@pytest.mark.parametrize("flags", [(), ("--strict-readiness", "false")], ids=["strict", "not-strict"])
def test_live_answers_while_a_slow_model_loads_and_ready_waits_for_it(tmp_path, flags):
    repo = tmp_path / "models"
    started, gate = tmp_path / "started", tmp_path / "gate"
    write_slow_model(repo, started, gate)
    with ServerProcess(repo, *flags).start(expect_ready=False) as server:
        _wait_for(started.exists, "the slow model's initialize starting")
        _check_while_loading(server)
        assert "naiad is live" in server.log() and "naiad is ready" not in server.log()
        gate.write_text("go")
        _check_after_loading(server)


@pytest.mark.slow
def test_front_doors_answer_live_while_the_model_home_loads(tmp_path):
    repo = tmp_path / "models"
    started, gate = tmp_path / "started", tmp_path / "gate"
    write_slow_model(repo, started, gate)
    with ServerProcess(repo, workers=2).start(expect_ready=False) as server:
        _wait_for(started.exists, "the slow model's initialize starting")
        _check_while_loading(server)
        gate.write_text("go")
        _check_after_loading(server)


def test_a_taken_port_fails_at_once_before_any_model_loads(tmp_path):
    repo = tmp_path / "models"
    started, gate = tmp_path / "started", tmp_path / "gate"
    # Were the model loaded first, its initialize would hold the start-up for 30 s.
    write_slow_model(repo, started, gate, wait_s=30.0)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = ServerProcess(repo)
        server.args[server.args.index("--grpc-port") + 1] = str(taken.getsockname()[1])
        began = time.monotonic()
        with server.start(expect_ready=False):
            code = server.wait(timeout=20)
            elapsed = time.monotonic() - began
            log = server.log()
    assert code == 1
    assert "address already in use" in log.lower()
    assert "grpc frontend failed to start" in log
    assert not started.exists(), "the model's initialize ran before the taken port was noticed"
    assert elapsed < 20
