"""naiad on Ray Serve, for real: two replicas behind Ray Serve's HTTP proxy on a local
cluster (no direct ports), driven with tritonclient."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import naiad_ray
import numpy as np
import pytest
import tritonclient.http as httpclient
from ray import serve
from ray_clients import THROUGH_PROXY, Load, infer_pid, running_replicas, wait_for
from ray_models import write_identity_model, write_pid_model
from tritonclient.utils import InferenceServerException

# Each test deploys replicas on the directory's local Ray cluster, whose start takes a
# minute on a loaded machine: every test here is slow.
pytestmark = pytest.mark.slow


def process_title(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.fixture(scope="module")
def two_replicas(serve_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    repository = tmp_path_factory.mktemp("repository")
    write_pid_model(repository, "pid_add")
    write_identity_model(repository)
    app = naiad_ray.build_app(str(repository), min_replicas=2, max_replicas=2, num_cpus=0.5, **THROUGH_PROXY)
    serve.run(app, name="naiad", route_prefix="/")
    try:
        yield serve_url
    finally:
        serve.delete("naiad")


@pytest.fixture
def client(two_replicas: str) -> Iterator[httpclient.InferenceServerClient]:
    client = httpclient.InferenceServerClient(two_replicas)
    yield client
    client.close()


def test_kserve_v2_through_the_ray_proxy(client: httpclient.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("pid_add")
    assert "binary_tensor_data" in client.get_server_metadata()["extensions"]
    metadata = client.get_model_metadata("pid_add")
    assert [o["name"] for o in metadata["outputs"]] == ["SUM", "PID"]
    assert client.get_model_config("pid_add")["max_batch_size"] == 8
    # JSON tensors and the binary-tensor extension both pass the proxy unchanged.
    assert infer_pid(client, binary=False) > 0
    assert infer_pid(client, binary=True) > 0
    # naiad's errors reach the client as naiad (and Triton) word them.
    with pytest.raises(InferenceServerException, match="unknown model"):
        client.infer(
            "no_such_model",
            [httpclient.InferInput("INPUT0", [1, 4], "FP32").set_data_from_numpy(np.zeros((1, 4), np.float32))],
        )
    assert client.is_server_ready()


def test_large_binary_tensors_cross_the_proxy_whole(client: httpclient.InferenceServerClient) -> None:
    # 4 MiB each way: Ray Serve passes the body to the replica, and the answer back, in parts.
    data = np.random.default_rng(7).random(1 << 20, dtype=np.float32)
    tensor = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data, binary_data=True)
    result = client.infer("identity", [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_requests_spread_over_both_replicas(two_replicas: str) -> None:
    with Load(two_replicas, clients=4) as load:
        wait_for(lambda: len(load.pids_since(0)) >= 2, 30, "answers from two replicas")
    assert not load.errors()
    pids = load.pids_since(0)
    assert len(pids) == 2
    for pid in pids:
        assert "ServeReplica:naiad:naiad" in process_title(pid)


CLIENTS = 8


def test_a_killed_replica_loses_only_the_requests_it_was_running(two_replicas: str) -> None:
    with Load(two_replicas, clients=CLIENTS) as load:
        wait_for(lambda: len(load.pids_since(0)) >= 2, 30, "answers from two replicas")
        victim, survivor = sorted(load.pids_since(0))
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        # Ray Serve replaces the replica; meanwhile its proxy routes to the survivor.
        wait_for(
            lambda: running_replicas() == 2 and load.pids_since(killed_at) - {victim, survivor},
            60,
            "Ray Serve to replace the killed replica and route to it",
        )
        restarted_at = time.monotonic()
        wait_for(
            lambda: len([o for o in load.outcomes if o.started > restarted_at]) >= 50, 30, "requests after the restart"
        )
    # A SIGKILL takes the requests the victim was running with it: Ray Serve's proxy answers
    # those 500 (it does not resend a request a replica may have half run). Every request
    # sent after the kill is answered, by the survivor until the replacement is up.
    failed = [(round(o.started - killed_at, 3), o.error) for o in load.errors()]
    assert all(started < 0 for started, _ in failed), f"requests sent after the kill failed: {failed}"
    assert len(failed) <= CLIENTS, failed
    after_kill = [o.pid for o in load.outcomes if o.started > killed_at + 0.5 and o.started < restarted_at]
    assert survivor in after_kill and victim not in after_kill
    replacement = load.pids_since(killed_at) - {victim, survivor}
    assert len(replacement) == 1
    assert load.pids_since(restarted_at) <= {survivor} | replacement


def test_a_model_that_fails_to_load_fails_the_deployment(serve_url: str, tmp_path: Path) -> None:
    # As `naiad serve --exit-on-error=true`: Ray Serve reports why instead of routing to a
    # replica that is not ready.
    write_pid_model(tmp_path, "broken")
    (tmp_path / "broken" / "config.pbtxt").write_text('name: "broken"\nbackend: "no_such_backend"\n')
    with pytest.raises(RuntimeError, match="Deploying application broken failed"):
        serve.run(
            naiad_ray.build_app(str(tmp_path), num_cpus=0.5, **THROUGH_PROXY), name="broken", route_prefix="/broken"
        )
    try:
        message = serve.status().applications["broken"].deployments["naiad"].message
        assert "1 model(s) failed to load: backend 'no_such_backend' is not installed" in message, message
    finally:
        serve.delete("broken")
