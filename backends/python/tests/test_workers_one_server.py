"""Whatever the worker processes, a model's config means what it says, as in one Triton
server: `instance_group { count: N }` is N instances, each seeing its share of every
connection's requests; a dynamic batch forms from requests that reached different workers; the
response cache and the rate limiter are the server's. Each test runs with naiad's default
worker count (one process on two CPUs or fewer, one per CPU above) and with two workers (a
front door and the model home).

The models run in their own processes (the Python backend's default) and answer with their
process id and a count of the requests that process has seen."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

COUNTING_MODEL = textwrap.dedent("""
    import json
    import os
    import time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.seen = 0
            self.delay = float(json.loads(args["model_config"])["parameters"]["delay"]["string_value"])

        def execute(self, requests):
            started = time.time()
            time.sleep(self.delay)
            responses = []
            for request in requests:
                self.seen += 1
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("PID", np.array([[os.getpid()]], dtype=np.int64)),
                    pb_utils.Tensor("SEEN", np.array([[self.seen]], dtype=np.int64)),
                    pb_utils.Tensor("SPAN", np.array([[started, time.time()]], dtype=np.float64))]))
            return responses
""")


def counting_config(name: str, extra: str = "", count: int = 1, delay: float = 0.0, group: str = "") -> str:
    return f'''
name: "{name}"
backend: "python"
max_batch_size: 16
input [ {{ name: "IN" data_type: TYPE_INT64 dims: [ 1 ] }} ]
output [
  {{ name: "PID" data_type: TYPE_INT64 dims: [ 1 ] }},
  {{ name: "SEEN" data_type: TYPE_INT64 dims: [ 1 ] }},
  {{ name: "SPAN" data_type: TYPE_FP64 dims: [ 2 ] }}
]
instance_group [ {{ count: {count} kind: KIND_CPU {group} }} ]
parameters {{ key: "delay" value: {{ string_value: "{delay}" }} }}
{extra}
'''


MODELS = {
    "single": counting_config("single", "dynamic_batching { }"),
    "pair": counting_config("pair", "dynamic_batching { }", count=2),
    # A generous queue delay: eight requests sent at once from eight connections make one batch.
    "batched": counting_config(
        "batched", "dynamic_batching { max_queue_delay_microseconds: 3000000 preferred_batch_size: [ 8 ] }"
    ),
    "cached": counting_config("cached", "response_cache { enable: true }"),
    # Two models whose instances each need the one resource R: never two executions at once.
    "limited_a": counting_config("limited_a", delay=0.3, group='rate_limiter { resources [ { name: "R" count: 1 } ] }'),
    "limited_b": counting_config("limited_b", delay=0.3, group='rate_limiter { resources [ { name: "R" count: 1 } ] }'),
}


@pytest.fixture(scope="module", params=[None, 2], ids=["default-workers", "two-workers"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("one_server_repo")
    for name, config in MODELS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config)
        (root / name / "1" / "model.py").write_text(COUNTING_MODEL)
    with ServerProcess(
        root,
        "--cache-config",
        "local,size=1048576",
        "--rate-limit",
        "execution_count",
        "--rate-limit-resource",
        "R:1",
        workers=request.param,
    ) as running:
        yield running


def _send(server: ServerProcess, protocol: str, model: str, value: int) -> dict[str, Any]:
    """One request on a connection of its own; the outputs as plain values."""
    module: Any = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
    try:
        tensor = module.InferInput("IN", [1, 1], "INT64")
        tensor.set_data_from_numpy(np.array([[value]], dtype=np.int64))
        result = client.infer(model, [tensor])
        return {name: result.as_numpy(name)[0].tolist() for name in ("PID", "SEEN", "SPAN")}
    finally:
        client.close()


def _on_connections(server: ServerProcess, model: str, total: int, connections: int) -> list[dict[str, Any]]:
    """`total` requests over `connections` connections at once, half HTTP and half gRPC,
    each connection sending its share one after the other."""

    def connection(index: int) -> list[dict[str, Any]]:
        protocol = "http" if index % 2 else "grpc"
        module: Any = httpclient if protocol == "http" else grpcclient
        client = module.InferenceServerClient(server.http_url if protocol == "http" else server.grpc_url)
        answers = []
        try:
            for n in range(index, total, connections):
                tensor = module.InferInput("IN", [1, 1], "INT64")
                tensor.set_data_from_numpy(np.array([[n]], dtype=np.int64))
                result = client.infer(model, [tensor])
                answers.append({name: result.as_numpy(name)[0].tolist() for name in ("PID", "SEEN")})
        finally:
            client.close()
        return answers

    with ThreadPoolExecutor(connections) as pool:
        return [answer for share in pool.map(connection, range(connections)) for answer in share]


def _statistics(server: ServerProcess, model: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats", timeout=10) as answer:
        stats: dict[str, Any] = json.loads(answer.read())["model_stats"][0]
    return stats


def test_the_layout(server: ServerProcess) -> None:
    cpus = len(os.sched_getaffinity(0))
    default = "--workers" not in server.args
    expected = (cpus if cpus > 2 else 1) if default else 2
    assert len(server.worker_pids()) == expected
    # Several workers: the models live in one of them, the model home.
    assert (server.model_home_pid() is not None) == (expected > 1)


def test_one_instance_sees_every_request_of_every_connection(server: ServerProcess) -> None:
    answers = _on_connections(server, "single", 200, 16)
    assert len(answers) == 200
    assert len({a["PID"][0] for a in answers}) == 1
    assert max(a["SEEN"][0] for a in answers) == 200
    assert sorted(a["SEEN"][0] for a in answers) == list(range(1, 201))


def test_two_instances_are_two_processes_sharing_the_requests(server: ServerProcess) -> None:
    answers = _on_connections(server, "pair", 200, 16)
    seen_by: dict[int, int] = {}
    for answer in answers:
        pid = answer["PID"][0]
        seen_by[pid] = max(seen_by.get(pid, 0), answer["SEEN"][0])
    assert len(seen_by) == 2
    assert sum(seen_by.values()) == 200


def test_a_dynamic_batch_forms_from_requests_on_different_workers(server: ServerProcess) -> None:
    barrier = threading.Barrier(8)

    def send(index: int) -> dict[str, Any]:
        barrier.wait()
        return _send(server, "http" if index % 2 else "grpc", "batched", index)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, range(8)))
    assert sorted(a["SEEN"][0] for a in answers) == list(range(1, 9))
    stats = _statistics(server, "batched")
    assert stats["inference_count"] == 8
    assert stats["execution_count"] == 1, stats["batch_stats"]
    assert [row["batch_size"] for row in stats["batch_stats"]] == [8]


def test_the_response_cache_hits_across_connections(server: ServerProcess) -> None:
    answers = [_send(server, "http" if i % 2 else "grpc", "cached", 7) for i in range(12)]
    # Every answer is the first one, from the cache: the model ran once.
    assert all(a == answers[0] for a in answers)
    inference = _statistics(server, "cached")["inference_stats"]
    assert inference["cache_miss"]["count"] == 1
    assert inference["cache_hit"]["count"] == 11


def test_the_rate_limiters_resources_are_counted_once_per_server(server: ServerProcess) -> None:
    barrier = threading.Barrier(6)

    def send(index: int) -> list[float]:
        barrier.wait()
        span: list[float] = _send(
            server, "http" if index % 2 else "grpc", "limited_b" if index % 3 else "limited_a", 0
        )["SPAN"]
        return span

    with ThreadPoolExecutor(6) as pool:
        spans = sorted(pool.map(send, range(6)))
    # One resource R for the whole server: one execution at a time, of either model.
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end - 0.001, spans
