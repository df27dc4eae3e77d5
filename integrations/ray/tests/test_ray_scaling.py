"""Ray Serve's autoscaling on queue length and Ray's resource requests, for real on the
local cluster, and how many GPUs a repository's instance groups ask for."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import naiad_ray
import pytest
import ray
import tritonclient.http as httpclient
from ray import serve
from ray_clients import THROUGH_PROXY, Load, infer_pid, running_replicas, wait_for
from ray_models import write_pid_model
from tritonclient.utils import InferenceServerException

from naiad import ConfigError, NaiadError, ServerOptions
from naiad.testing import free_port

# Each test deploys replicas on the directory's local Ray cluster, whose start takes a
# minute on a loaded machine: every test here is slow.
pytestmark = pytest.mark.slow


def test_scales_on_naiads_queue_on_the_direct_path(serve_url: str, tmp_path: Path) -> None:
    # One instance taking 50 ms a request, 8 clients straight to the replica's port: about 7
    # wait in naiad's queue, more than three times the target of 2, so the policy adds the
    # second replica it may (Ray Serve's own count of requests sees none of these). Once the
    # load stops, the queue is empty and the deployment shrinks back to one replica.
    write_pid_model(tmp_path, "pid_add", sleep_s=0.05)
    http_port = free_port()
    # Built as `serve run naiad_ray:app_builder` or a Serve config file's `args:` build it.
    args = naiad_ray.AppArgs.model_validate(
        {
            "model_repository": str(tmp_path),
            "host": "127.0.0.1",
            "http_port": str(http_port),
            "grpc_port": None,
            "min_replicas": "1",
            "max_replicas": "2",
            "target_pending_requests": "2",
            "num_cpus": "0.5",
            "autoscaling_options": {
                "upscale_delay_s": 0,
                "downscale_delay_s": 0,
                "metrics_interval_s": 0.5,
                "look_back_period_s": 1,
            },
        }
    )
    serve.run(naiad_ray.app_builder(args), name="naiad", route_prefix=None)
    try:
        assert running_replicas() == 1
        with Load(f"127.0.0.1:{http_port}", clients=8) as load:
            wait_for(lambda: running_replicas() == 2, 60, "a second replica under load")
        assert not load.errors()
        wait_for(lambda: running_replicas() == 1, 60, "the deployment to shrink back once idle")
    finally:
        serve.delete("naiad")


def test_a_full_queue_refuses_at_once(serve_url: str, tmp_path: Path) -> None:
    # One request running (half a second) and one waiting fill the replica and the proxy's
    # queue; the others of four concurrent requests are refused with 503 straight away. (When
    # the second arrives before the first has reached the replica, both count as queued in
    # the proxy for a moment and the second is refused too: one or two are answered.)
    write_pid_model(tmp_path, "pid_add", sleep_s=0.5)
    app = naiad_ray.build_app(
        str(tmp_path), max_ongoing_requests=1, max_queued_requests=1, num_cpus=0.5, **THROUGH_PROXY
    )
    serve.run(app, name="naiad", route_prefix="/")
    try:

        def one(_: int) -> tuple[str, float]:
            client = httpclient.InferenceServerClient(serve_url)
            started = time.monotonic()
            try:
                infer_pid(client)
                return "ok", time.monotonic() - started
            except InferenceServerException as exc:
                return str(exc.status()), time.monotonic() - started
            finally:
                client.close()

        with ThreadPoolExecutor(4) as pool:
            outcomes = list(pool.map(one, range(4)))
        kinds = sorted(kind for kind, _ in outcomes)
        assert kinds in (["503", "503", "ok", "ok"], ["503", "503", "503", "ok"]), outcomes
        assert all(seconds < 0.4 for kind, seconds in outcomes if kind == "503"), outcomes
    finally:
        serve.delete("naiad")


def test_replicas_reserve_the_gpus_of_the_instance_groups(serve_url: str, tmp_path: Path) -> None:
    # The cluster declares one (logical) GPU; this machine has no device, so the KIND_GPU
    # model is left unloaded (explicit model control), yet the replica reserves a GPU for it.
    write_pid_model(tmp_path, "pid_add")
    write_pid_model(tmp_path, "on_gpu", kind="KIND_GPU")
    options = ServerOptions(model_control_mode="explicit", load_models=["pid_add"])
    app = naiad_ray.build_app(str(tmp_path), num_cpus=0.5, server_options=options, **THROUGH_PROXY)
    assert ray.available_resources().get("GPU") == 1
    serve.run(app, name="naiad", route_prefix="/")
    try:
        assert ray.available_resources().get("GPU", 0) == 0
    finally:
        serve.delete("naiad")
    wait_for(lambda: ray.available_resources().get("GPU") == 1, 30, "the GPU to be given back")


def write_config(repository: Path, name: str, groups: str) -> None:
    (repository / name).mkdir()
    (repository / name / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n{groups}\n')


def test_gpus_per_replica(tmp_path: Path) -> None:
    cpu, gpu = tmp_path / "cpu", tmp_path / "gpu"
    cpu.mkdir()
    gpu.mkdir()
    write_config(cpu, "plain", "")
    write_config(cpu, "cpu", "instance_group [ { count: 4 kind: KIND_CPU } ]")
    write_config(cpu, "auto", "instance_group [ { count: 2 } ]")
    (cpu / "no_config" / "1").mkdir(parents=True)
    assert naiad_ray.gpus_per_replica([str(cpu)]) == 0
    # `count` instances share each GPU; listed ordinals need as many GPUs as the highest.
    write_config(gpu, "any_gpu", "instance_group [ { count: 3 kind: KIND_GPU } ]")
    assert naiad_ray.gpus_per_replica([str(cpu), str(gpu)]) == 1
    write_config(gpu, "listed", "instance_group [ { count: 1 kind: KIND_CPU }, { kind: KIND_GPU gpus: [ 0, 2 ] } ]")
    assert naiad_ray.gpus_per_replica([str(cpu), str(gpu)]) == 3
    # A remote repository is not downloaded to be read.
    assert naiad_ray.gpus_per_replica(["s3://bucket/models", str(cpu)]) == 0


def test_gpus_per_replica_names_a_bad_config(tmp_path: Path) -> None:
    write_config(tmp_path, "broken", "instance_group [ { kind: KIND_TPU } ]")
    with pytest.raises(ConfigError, match="broken"):
        naiad_ray.gpus_per_replica([str(tmp_path)])
    with pytest.raises(NaiadError, match="is not a directory"):
        naiad_ray.gpus_per_replica([str(tmp_path / "missing")])


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"model_repository": []}, "at least one model repository"),
        ({"model_repository": "m", "min_replicas": 3, "max_replicas": 2}, "min_replicas <= max_replicas"),
        ({"model_repository": "m", "target_pending_requests": 0}, "must be positive"),
        ({"model_repository": "m", "min_replicas": 0}, "min_replicas 0 needs http_port and grpc_port None"),
        ({"model_repository": "m", "http_port": 0}, "http_port must be a port number from 1 to 65535"),
        ({"model_repository": "m", "http_port": 9000, "grpc_port": 9000}, "must differ"),
        (
            {
                "model_repository": "m",
                "max_replicas": 2,
                "server_options": ServerOptions(model_control_mode="explicit"),
            },
            "would reach one replica only",
        ),
    ],
)
def test_build_app_refuses_bad_arguments(arguments: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        naiad_ray.build_app(**arguments)
