"""A model's process polls for the server's next batch after sending its answers (the server's
`--busy-poll-us` window, naiad_wire.busy_poll) while batches come within that window of the
answers before them, and sleeps between batches that come further apart, or always with a
window of 0. Measured on a real `naiad serve` through tritonclient, with the model process's
own count of voluntary context switches (each sleep of its event loop is one) and its CPU
time."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

# A window far wider than a request's round trip here, so that back-to-back requests come
# within it on a busy machine too.
WINDOW_US = 20_000

MODEL_PY = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        pid = np.array([os.getpid()], dtype=np.int64)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PID", pid)]) for _ in requests]
"""

CONFIG = """
name: "pid"
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] } ]
"""


def _repository(root: Path) -> Path:
    (root / "pid" / "1").mkdir(parents=True)
    (root / "pid" / "config.pbtxt").write_text(CONFIG)
    (root / "pid" / "1" / "model.py").write_text(MODEL_PY)
    return root


class _ModelProcess:
    """The model's process, as /proc shows its main thread (the one that serves batches)."""

    def __init__(self, client: httpclient.InferenceServerClient) -> None:
        self.client = client
        self.pid = self.infer()

    def infer(self) -> int:
        data = httpclient.InferInput("IN", [1], "FP32")
        data.set_data_from_numpy(np.zeros(1, np.float32))
        return int(self.client.infer("pid", [data]).as_numpy("PID")[0])

    def sleeps(self) -> int:
        with open(f"/proc/{self.pid}/task/{self.pid}/status") as status:
            for line in status:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
        raise AssertionError("no voluntary_ctxt_switches in the model process's status")

    def cpu_s(self) -> float:
        with open(f"/proc/{self.pid}/task/{self.pid}/schedstat") as schedstat:
            return int(schedstat.read().split()[0]) / 1e9

    def requests(self, count: int, pause_s: float) -> tuple[int, float]:
        """The sleeps and the CPU seconds of the model's process over `count` requests sent
        one after the other, `pause_s` apart."""
        sleeps, cpu = self.sleeps(), self.cpu_s()
        for _ in range(count):
            assert self.infer() == self.pid
            time.sleep(pause_s)
        return self.sleeps() - sleeps, self.cpu_s() - cpu


def test_a_model_process_polls_between_close_batches_and_sleeps_between_far_ones(tmp_path):
    with ServerProcess(_repository(tmp_path), "--busy-poll-us", str(WINDOW_US)) as server:
        model = _ModelProcess(httpclient.InferenceServerClient(server.http_url))
        for _ in range(10):
            model.infer()
        close_sleeps, _ = model.requests(40, 0.0)
        # 60 ms apart, three windows: after the last close batch's answers the process polls
        # through one window (in this first pause), and then sleeps as soon as it has answered.
        model.requests(1, 0.06)
        far_sleeps, far_cpu = model.requests(10, 0.06)
    print(f"model process sleeps: {close_sleeps} over 40 close requests, {far_sleeps} over 10 far ones")
    # Back to back, the next batch finds the process awake: a batch delayed past the window
    # on a busy machine may find it asleep.
    assert close_sleeps <= 8, close_sleeps
    # Far apart, it sleeps at each, and polls through none of the ten 20 ms windows (200 ms).
    assert far_sleeps >= 10, far_sleeps
    assert far_cpu < 0.08, far_cpu


def test_a_window_of_0_leaves_the_model_process_sleeping_between_batches(tmp_path):
    with ServerProcess(_repository(tmp_path), "--busy-poll-us", "0") as server:
        model = _ModelProcess(httpclient.InferenceServerClient(server.http_url))
        for _ in range(10):
            model.infer()
        sleeps, _ = model.requests(40, 0.0)
    assert sleeps >= 40, sleeps
