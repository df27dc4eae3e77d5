"""A model that misbehaves fails only its own requests, is restarted, and nothing else stops."""

from __future__ import annotations

import numpy as np
import pytest
from python_backend_servers import bytes_array

from naiad import ErrorCode


def mode(name: str) -> dict[str, np.ndarray]:
    return {"MODE": bytes_array(name.encode())}


def pid_of(served) -> bytes:
    return served.infer("misbehaving", mode("ok")).output("OUT").data[0]


def test_model_log_lines_reach_the_server_log(served, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="naiad.backends.python"):
        served.infer("misbehaving", mode("log"))
    # The log lines travel on the same channel ahead of the result, so they are in already.
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "naiad.backends.python"]
    assert ("WARNING", "model 'misbehaving' instance 'misbehaving_0': a warning from the model") in lines
    assert ("ERROR", "model 'misbehaving' instance 'misbehaving_0': an error from the model") in lines


def test_default_mode_model_may_answer_through_the_response_sender(served):
    assert served.infer("misbehaving", mode("sender")).output("OUT").data[0] == pid_of(served)


def test_execute_that_raises_fails_the_request_with_its_message(served):
    error = served.infer_error("misbehaving", mode("raise"))
    assert error.code is ErrorCode.INTERNAL
    assert "ValueError: the model raised on purpose" in error.message
    assert "model 'misbehaving'" in error.message


def test_triton_model_exception_is_reported(served):
    error = served.infer_error("misbehaving", mode("model_exception"))
    assert "TritonModelException: a TritonModelException" in error.message


@pytest.mark.parametrize(
    "name,expected",
    [
        ("none", "returned None for a batch of 1 requests"),
        ("too_few", "returned 0 responses for a batch of 1 requests"),
        ("not_a_response", "returned a str instead of a pb_utils.InferenceResponse"),
    ],
)
def test_wrong_return_values_are_clear_errors(served, name, expected):
    before = pid_of(served)
    error = served.infer_error("misbehaving", mode(name))
    assert error.code is ErrorCode.INTERNAL
    assert expected in error.message
    # A wrong answer is the model's bug, not a reason to restart it.
    assert pid_of(served) == before


def test_a_crashing_model_fails_its_request_and_is_restarted(served):
    before = pid_of(served)
    error = served.infer_error("misbehaving", mode("crash"))
    assert error.code is ErrorCode.INTERNAL
    assert "exited unexpectedly (exit code 3)" in error.message
    # Other models never noticed.
    a = np.ones((1, 4), dtype=np.float32)
    np.testing.assert_array_equal(
        served.infer("add_sub_fp32", {"INPUT0": a, "INPUT1": a}).output("OUTPUT0").data, a * 2
    )
    # And the crashed one serves again, from a new process.
    after = pid_of(served)
    assert after != before


def test_a_hanging_model_times_out_and_is_restarted(served):
    before = pid_of(served)
    error = served.infer_error("misbehaving", mode("hang"))
    assert error.code is ErrorCode.INTERNAL
    assert "did not finish within 2 s" in error.message
    assert "execute_timeout_seconds" in error.message
    assert pid_of(served) != before


SERVER_SCRIPT = """
import asyncio, sys
from naiad import Server, ServerOptions

async def main():
    async with Server(ServerOptions(model_repositories=[sys.argv[1]], model_control_mode="explicit",
                                    load_models=["add_sub_flat"])) as server:
        print(server.model("add_sub_flat").runners[0].instance._connection.process.pid, flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


def test_model_processes_die_with_a_killed_server():
    import os
    import signal
    import subprocess
    import sys
    import time

    from python_backend_servers import MODELS

    server = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(MODELS)], stdout=subprocess.PIPE, text=True)
    try:
        stub_pid = int(server.stdout.readline())
        os.kill(stub_pid, 0)  # alive while the server is
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(stub_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"model process {stub_pid} outlived its server")


STUCK_SERVER_SCRIPT = """
import asyncio, sys
import numpy as np
from naiad import InferenceRequest, Server, ServerOptions, Tensor

async def main():
    async with Server(ServerOptions(model_repositories=[sys.argv[1]])) as server:
        request = InferenceRequest("stuck", [Tensor.from_numpy("IN", np.ones(1, dtype=np.float32))])
        call = asyncio.ensure_future(server.infer(request))
        await asyncio.sleep(1)  # the model is inside execute now
        print(server.model("stuck").runners[0].instance._connection.process.pid, flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""

STUCK_MODEL = """
import threading


class TritonPythonModel:
    def execute(self, requests):
        threading.Event().wait()
"""


def test_a_model_stuck_in_execute_dies_with_a_killed_server(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "stuck" / "1").mkdir(parents=True)
    (tmp_path / "stuck" / "1" / "model.py").write_text(STUCK_MODEL)
    (tmp_path / "stuck" / "config.pbtxt").write_text(
        'backend: "python"\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    )
    server = subprocess.Popen(
        [sys.executable, "-c", STUCK_SERVER_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        stub_pid = int(server.stdout.readline())
        os.kill(stub_pid, 0)
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(stub_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(stub_pid, signal.SIGKILL)
    pytest.fail(f"model process {stub_pid}, stuck in execute, outlived its server")


ONE_SHOT_MODEL = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        marker = os.path.join(args["model_repository"], "started")
        if os.path.exists(marker):
            raise RuntimeError("refusing to start twice")
        open(marker, "w").close()

    def execute(self, requests):
        os._exit(7)
"""


def test_a_model_that_cannot_restart_answers_unavailable(tmp_path):
    from python_backend_servers import ServerThread

    from naiad import ServerOptions

    (tmp_path / "one_shot" / "1").mkdir(parents=True)
    (tmp_path / "one_shot" / "1" / "model.py").write_text(ONE_SHOT_MODEL)
    (tmp_path / "one_shot" / "config.pbtxt").write_text(
        'name: "one_shot"\nbackend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    )
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:
        x = {"X": np.array([1], dtype=np.float32)}
        crashed = server.infer_error("one_shot", x)
        assert "exited unexpectedly (exit code 7)" in crashed.message
        refused = server.infer_error("one_shot", x)
        assert refused.code is ErrorCode.UNAVAILABLE
        assert "could not be restarted" in refused.message and "refusing to start twice" in refused.message
    finally:
        server.close()
