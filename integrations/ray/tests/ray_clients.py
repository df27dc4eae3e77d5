"""tritonclient helpers shared by the tests, and a bounded load loop that records every
request's outcome (tritonclient never retries an inference, so every failure is seen)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from geventhttpclient.response import HTTPConnectionClosed
from ray import serve
from tritonclient.utils import InferenceServerException

Client = httpclient.InferenceServerClient | grpcclient.InferenceServerClient

# build_app's arguments for replicas reached only through Ray Serve's proxy (no direct ports).
THROUGH_PROXY = {"http_port": None, "grpc_port": None}


def infer_pid(client: Client, model: str = "pid_add", binary: bool = True) -> int:
    """One inference of the pid model over HTTP or gRPC (as the client speaks); checks the
    sum and answers the replica's pid."""
    module = grpcclient if isinstance(client, grpcclient.InferenceServerClient) else httpclient
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    b = np.full((1, 4), 2, dtype=np.float32)
    inputs = [module.InferInput("INPUT0", [1, 4], "FP32"), module.InferInput("INPUT1", [1, 4], "FP32")]
    if module is httpclient:
        inputs[0].set_data_from_numpy(a, binary_data=binary)
        inputs[1].set_data_from_numpy(b, binary_data=binary)
        outputs = [httpclient.InferRequestedOutput(name, binary_data=binary) for name in ("SUM", "PID")]
    else:
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        outputs = [grpcclient.InferRequestedOutput(name) for name in ("SUM", "PID")]
    result = client.infer(model, inputs, outputs=outputs)
    np.testing.assert_array_equal(result.as_numpy("SUM"), a + b)
    return int(result.as_numpy("PID")[0, 0])


def http_client(url: str) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=30)


def grpc_client(url: str) -> grpcclient.InferenceServerClient:
    # A connection of its own: gRPC channels to one address share connections by default.
    return grpcclient.InferenceServerClient(url, channel_args=[("grpc.use_local_subchannel_pool", 1)])


def is_connection_failure(exc: BaseException) -> bool:
    """The request was lost with its connection (reset, closed, refused), before any answer:
    what a client sees of a server process that is gone."""
    if isinstance(exc, InferenceServerException):
        return exc.status() == "StatusCode.UNAVAILABLE"  # gRPC: the channel lost its connection
    return isinstance(exc, (ConnectionError, HTTPConnectionClosed))


@dataclass(frozen=True)
class Outcome:
    started: float
    pid: int | None
    error: str | None
    retried: bool = False


class Load:
    """`clients` threads, each with its own tritonclient, sending requests back to back
    until stopped (or `limit_s` passed). With `retry_connection_failures`, a request lost
    with its connection is sent again on a new connection, up to `RESENDS` times 0.2 s
    apart (a replica being killed accepts connections until its process is gone), and
    marked `retried`."""

    RESENDS = 5

    def __init__(
        self,
        url: str,
        clients: int,
        model: str = "pid_add",
        limit_s: float = 90.0,
        connect: Callable[[str], Client] = http_client,
        retry_connection_failures: bool = False,
    ) -> None:
        self.outcomes: list[Outcome] = []
        self._stop = threading.Event()
        self._deadline = time.monotonic() + limit_s
        self._resends = self.RESENDS if retry_connection_failures else 0
        self._threads = [
            threading.Thread(target=self._run, args=(url, model, connect), daemon=True) for _ in range(clients)
        ]

    def _run(self, url: str, model: str, connect: Callable[[str], Client]) -> None:
        client = connect(url)
        try:
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                started = time.monotonic()
                for attempt in range(self._resends + 1):
                    try:
                        self.outcomes.append(Outcome(started, infer_pid(client, model), None, attempt > 0))
                        break
                    except Exception as exc:  # noqa: BLE001 - every failure is recorded and asserted on
                        if attempt == self._resends or not is_connection_failure(exc):
                            self.outcomes.append(Outcome(started, None, f"{type(exc).__name__}: {exc}", attempt > 0))
                            break
                        client.close()
                        time.sleep(0.2)
                        client = connect(url)
        finally:
            client.close()

    def __enter__(self) -> Load:
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


def replica_states(app: str = "naiad") -> dict[str, int]:
    """How many replicas are in each state (RUNNING, STARTING, STOPPING, ...)."""
    return {state: n for state, n in serve.status().applications[app].deployments["naiad"].replica_states.items() if n}


def running_replicas(app: str = "naiad") -> int:
    return replica_states(app).get("RUNNING", 0)
