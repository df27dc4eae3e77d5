"""The direct path, for real: two replicas on a local cluster serving naiad's own HTTP/1.1
and gRPC servers on shared loopback ports, driven with tritonclient over both protocols."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import naiad_ray
import numpy as np
import pytest
import tritonclient.http as httpclient
from ray import serve
from ray_clients import Load, grpc_client, http_client, infer_pid, replica_states, running_replicas, wait_for
from ray_models import write_identity_model, write_pid_model
from tritonclient.utils import InferenceServerException

from naiad.testing import free_port

# Each test deploys replicas on the directory's local Ray cluster, whose start takes a
# minute on a loaded machine: every test here is slow.
pytestmark = pytest.mark.slow

APP = "direct"


def process_title(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


class Ports:
    """The two loopback ports every replica of the application listens on."""

    def __init__(self, repository: Path) -> None:
        self.repository = repository
        self.http, self.grpc = free_port(), free_port()

    def deploy(self, replicas: int) -> None:
        app = naiad_ray.build_app(
            str(self.repository),
            host="127.0.0.1",
            http_port=self.http,
            grpc_port=self.grpc,
            min_replicas=replicas,
            max_replicas=replicas,
            num_cpus=0.5,
        )
        serve.run(app, name=APP, route_prefix=None)  # nothing through Ray Serve's proxy

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc}"


@pytest.fixture(scope="module")
def ports(serve_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ports]:
    """Two replicas listening straight on the same two loopback ports."""
    repository = tmp_path_factory.mktemp("repository")
    write_pid_model(repository, "pid_add")
    write_identity_model(repository)
    ports = Ports(repository)
    ports.deploy(replicas=2)
    try:
        yield ports
    finally:
        serve.delete(APP)


def test_kserve_v2_over_http_straight_to_a_replica(ports: Ports) -> None:
    client = http_client(ports.http_url)
    try:
        assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("pid_add")
        assert "binary_tensor_data" in client.get_server_metadata()["extensions"]
        assert client.get_model_config("pid_add")["max_batch_size"] == 8
        assert infer_pid(client, binary=False) > 0
        assert infer_pid(client, binary=True) > 0
        data = np.random.default_rng(7).random(1 << 20, dtype=np.float32)  # 4 MiB each way
        tensor = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data, binary_data=True)
        result = client.infer("identity", [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT0")])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)
        with pytest.raises(InferenceServerException, match="unknown model"):
            client.get_model_metadata("no_such_model")
    finally:
        client.close()


def test_kserve_v2_over_grpc_straight_to_a_replica(ports: Ports) -> None:
    client = grpc_client(ports.grpc_url)
    try:
        assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("pid_add")
        metadata = client.get_model_metadata("pid_add", as_json=True)
        assert [o["name"] for o in metadata["outputs"]] == ["SUM", "PID"]
        assert infer_pid(client) > 0
        with pytest.raises(InferenceServerException, match="unknown model"):
            client.get_model_metadata("no_such_model")
    finally:
        client.close()


@pytest.mark.parametrize("connect, url", [(http_client, "http_url"), (grpc_client, "grpc_url")])
def test_new_connections_spread_over_the_replicas(ports: Ports, connect, url: str) -> None:
    # The kernel hands each new connection to one of the replicas listening on the port.
    pids = set()
    for _ in range(16):
        client = connect(getattr(ports, url))
        try:
            pids.add(infer_pid(client))
        finally:
            client.close()
    assert len(pids) == 2, pids
    for pid in pids:
        assert "ServeReplica:direct:naiad" in process_title(pid)


CLIENTS = 8


def pids_on_new_connections(url: str, enough: Callable[[set[int]], bool], timeout_s: float = 30) -> set[int]:
    """The pids of the replicas that answer one request on each of a series of new
    connections, until `enough` of them are seen (or the time is up)."""
    pids: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while not enough(pids) and time.monotonic() < deadline:
        client = http_client(url)
        try:
            pids.add(infer_pid(client))
        finally:
            client.close()
    return pids


def test_a_killed_replica_loses_only_its_connections(ports: Ports) -> None:
    # No proxy stands between a client and its replica: a SIGKILL takes the victim's
    # connections with it, and the requests on them are lost before any answer. A client
    # that sends such a request again on a new connection (as a load balancer retries a
    # reset connection) has every request answered: the kernel gives new connections to the
    # survivor (once the victim's process, which holds its listening socket, is gone) until
    # Ray Serve's replacement listens beside it.
    with Load(ports.http_url, clients=CLIENTS, retry_connection_failures=True) as load:
        # The victim is a replica that holds some of the load's connections. The kernel may
        # give all eight to one replica (1 time in 128), so the survivor is found through new
        # connections of its own.
        wait_for(lambda: load.pids_since(0), 30, "a first answer")
        victim = min(load.pids_since(0))
        others = pids_on_new_connections(ports.http_url, lambda pids: bool(pids - {victim})) - {victim}
        assert len(others) == 1, others
        (survivor,) = others
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: running_replicas(APP) == 2, 60, "Ray Serve to replace the killed replica")
        restarted_at = time.monotonic()
        wait_for(
            lambda: len([o for o in load.outcomes if o.started > restarted_at]) >= 50, 30, "requests after the restart"
        )
    assert not load.errors(), load.errors()[:5]
    retried = [round(o.started - killed_at, 3) for o in load.outcomes if o.retried]
    # Only requests on the victim's connections were lost: at most one per client, sent
    # around the kill; and the victim had some (it was seen answering).
    assert 1 <= len(retried) <= CLIENTS and all(-5 < t < 5 for t in retried), retried
    assert victim not in load.pids_since(killed_at + 1)
    # New connections reach the replacement too.
    pids = pids_on_new_connections(ports.http_url, lambda pids: bool(pids - {victim, survivor}))
    assert len(pids - {victim, survivor}) == 1, pids


def test_a_taken_port_fails_the_deployment_with_the_address(serve_url: str, tmp_path: Path) -> None:
    write_pid_model(tmp_path, "pid_add")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = naiad_ray.build_app(str(tmp_path), host="127.0.0.1", http_port=port, grpc_port=free_port(), num_cpus=0.5)
        with pytest.raises(RuntimeError, match="Deploying application taken failed"):
            serve.run(app, name="taken", route_prefix=None)
    try:
        message = serve.status().applications["taken"].deployments["naiad"].message
        assert f"cannot listen on 127.0.0.1:{port}" in message, message
    finally:
        serve.delete("taken")


def test_a_replica_the_autoscaler_removes_drains_its_connections(serve_url: str, tmp_path: Path) -> None:
    # Two replicas to start with, and a target no queue reaches: Ray Serve removes one a few
    # seconds in, under load. The replica it stops closes its listening sockets first,
    # finishes what it is answering and closes its connections: gRPC clients get a GOAWAY
    # and move to a new connection by themselves, without a failed call; an HTTP client's
    # next POST on a closed keep-alive connection never reaches a server and is sent again.
    write_pid_model(tmp_path, "pid_add")
    ports = Ports(tmp_path)
    app = naiad_ray.build_app(
        str(tmp_path),
        host="127.0.0.1",
        http_port=ports.http,
        grpc_port=ports.grpc,
        min_replicas=1,
        max_replicas=2,
        target_pending_requests=1000,
        num_cpus=0.5,
        autoscaling_options={
            "initial_replicas": 2,
            "downscale_delay_s": 5,
            "metrics_interval_s": 0.5,
            "look_back_period_s": 1,
        },
    )
    serve.run(app, name="shrinking", route_prefix=None)
    try:
        grpc_load = Load(ports.grpc_url, clients=16, connect=grpc_client)
        http_load = Load(ports.http_url, clients=4, retry_connection_failures=True)
        with grpc_load, http_load:
            wait_for(lambda: replica_states("shrinking") == {"RUNNING": 1}, 60, "Ray Serve to remove a replica")
            stopped_at = time.monotonic()
            wait_for(
                lambda: len([o for o in grpc_load.outcomes if o.started > stopped_at + 1]) >= 50,
                30,
                "gRPC requests after the removal",
            )
        assert not grpc_load.errors(), grpc_load.errors()[:5]
        assert not http_load.errors(), http_load.errors()[:5]
        before, after = grpc_load.pids_since(0), grpc_load.pids_since(stopped_at + 1)
        assert len(after) == 1 and http_load.pids_since(stopped_at + 1) == after
        # gRPC connections were on the removed replica (the kernel spreads the sixteen at
        # random: all on one replica one time in 32,768) and moved without a failed call.
        assert len(before) == 2, before
    finally:
        serve.delete("shrinking")
