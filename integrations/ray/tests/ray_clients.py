"""tritonclient helpers shared by the tests, and a bounded load loop that records every
request's outcome (tritonclient never retries, so every failure is seen)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import tritonclient.http as httpclient
from ray import serve


def infer_pid(client: httpclient.InferenceServerClient, model: str = "pid_add", binary: bool = True) -> int:
    """One inference of the pid model; checks the sum and answers the replica's pid."""
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    b = np.full((1, 4), 2, dtype=np.float32)
    inputs = [httpclient.InferInput("INPUT0", [1, 4], "FP32"), httpclient.InferInput("INPUT1", [1, 4], "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=binary)
    outputs = [httpclient.InferRequestedOutput(name, binary_data=binary) for name in ("SUM", "PID")]
    result = client.infer(model, inputs, outputs=outputs)
    np.testing.assert_array_equal(result.as_numpy("SUM"), a + b)
    return int(result.as_numpy("PID")[0, 0])


@dataclass(frozen=True)
class Outcome:
    started: float
    pid: int | None
    error: str | None


class Load:
    """`clients` threads, each with its own tritonclient, sending requests back to back
    until stopped (or `limit_s` passed)."""

    def __init__(self, url: str, clients: int, model: str = "pid_add", limit_s: float = 90.0) -> None:
        self.outcomes: list[Outcome] = []
        self._stop = threading.Event()
        self._deadline = time.monotonic() + limit_s
        self._threads = [threading.Thread(target=self._run, args=(url, model), daemon=True) for _ in range(clients)]

    def _run(self, url: str, model: str) -> None:
        client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=30)
        try:
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                started = time.monotonic()
                try:
                    self.outcomes.append(Outcome(started, infer_pid(client, model), None))
                except Exception as exc:  # noqa: BLE001 - every failure is recorded and asserted on
                    self.outcomes.append(Outcome(started, None, f"{type(exc).__name__}: {exc}"))
        finally:
            client.close()

    def __enter__(self) -> "Load":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def pids_since(self, moment: float) -> set[int]:
        return {o.pid for o in list(self.outcomes) if o.pid is not None and o.started >= moment}

    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.error is not None]


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.2)


def running_replicas() -> int:
    status = serve.status().applications["naiad"].deployments["naiad"]
    return status.replica_states.get("RUNNING", 0)
