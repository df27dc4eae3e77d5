"""`build_app`: a Ray Serve application of naiad replicas, sized from the repository."""

# No `from __future__ import annotations`: Ray reads `app_builder`'s annotation as a class.

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from ray.serve import Application

from naiad import ServerOptions
from naiad.frontends.http import DEFAULT_MAX_INPUT_SIZE

from .autoscaling import POLICY
from .gpus import gpus_per_replica
from .listeners import DirectPorts
from .replica import NaiadReplica

__all__ = ["AppArgs", "app_builder", "build_app"]


def build_app(
    model_repository: str | Sequence[str],
    *,
    http_port: int | None = 8000,
    grpc_port: int | None = 8001,
    host: str = "0.0.0.0",
    min_replicas: int = 1,
    max_replicas: int = 1,
    target_pending_requests: float = 32,
    max_ongoing_requests: int = 256,
    max_queued_requests: int = 1024,
    num_cpus: float = 1,
    num_gpus: float | None = None,
    autoscaling_options: Mapping[str, Any] | None = None,
    server_options: ServerOptions | None = None,
    max_input_size: int = DEFAULT_MAX_INPUT_SIZE,
    deployment_options: Mapping[str, Any] | None = None,
) -> Application:
    """A Ray Serve application whose replicas each run naiad on `model_repository` (a
    location or a list of them, local or remote, as `--model-repository` takes).

    Each replica serves naiad's own HTTP/1.1 and gRPC servers on `host`:`http_port` and
    `host`:`grpc_port` of its node, the ports shared by the replicas of the node (None
    leaves a protocol out; both None: only through Ray Serve's proxy). Run the application
    with a `route_prefix` to have Ray Serve's HTTP proxy route to the replicas as well.

    With `min_replicas < max_replicas` Ray Serve autoscales on queue pressure: it keeps about
    `target_pending_requests` requests waiting in each replica's naiad queues (plus those
    waiting in Ray Serve's proxies); `autoscaling_options` adds other keys of Ray Serve's
    `autoscaling_config` (`upscale_delay_s`, ...). Through Ray Serve's proxy,
    `max_ongoing_requests` is how many one replica takes at once (the rest wait in the
    proxy); keep it above the batch sizes the models' dynamic batchers form. Past
    `max_queued_requests` waiting in the proxy, requests are refused with 503 at once.

    Each replica asks Ray for `num_cpus` CPUs and `num_gpus` GPUs; `num_gpus` defaults to
    what the KIND_GPU instance groups of the local repositories need (`gpus_per_replica`).
    `server_options` sets everything else `naiad serve` flags set (its repositories are
    replaced; explicit model control needs a single replica). `deployment_options` go to Ray
    Serve's `Deployment.options` unchanged, last. See docs/ray.md.
    """
    repositories = [model_repository] if isinstance(model_repository, str) else list(model_repository)
    if not repositories:
        raise ValueError("build_app needs at least one model repository")
    if not 0 <= min_replicas <= max_replicas or max_replicas < 1:
        raise ValueError(
            f"need 0 <= min_replicas <= max_replicas and max_replicas >= 1, got {min_replicas} and {max_replicas}"
        )
    if min(target_pending_requests, max_ongoing_requests, max_queued_requests) <= 0:
        raise ValueError("target_pending_requests, max_ongoing_requests and max_queued_requests must be positive")
    direct = None
    if http_port is not None or grpc_port is not None:
        direct = DirectPorts(host, http_port, grpc_port, max_input_size)
        if min_replicas < 1:
            raise ValueError(
                "min_replicas 0 needs http_port and grpc_port None: with no replica running, "
                "nothing listens on the direct ports to wake the deployment"
            )
    options = dataclasses.replace(server_options or ServerOptions(), model_repositories=repositories)
    if options.model_control_mode == "explicit" and max_replicas > 1:
        # As `naiad serve --workers`: a load or unload request reaches the one replica it is routed to.
        raise ValueError(
            "model_control_mode 'explicit' needs max_replicas 1: a load or unload request would reach one "
            "replica only; use 'none', or 'poll' (every replica polls the repository)"
        )
    gpus = gpus_per_replica(repositories) if num_gpus is None else num_gpus
    settings: dict[str, Any] = {
        "max_ongoing_requests": max_ongoing_requests,
        # Ray Serve's own default lets the proxy's queue grow without bound.
        "max_queued_requests": max_queued_requests,
        "ray_actor_options": {"num_cpus": num_cpus, "num_gpus": gpus},
        # A log line per request costs more CPU than a small inference; naiad, like Triton,
        # keeps no access log by default.
        "logging_config": {"enable_access_log": False},
    }
    if min_replicas == max_replicas:
        settings["num_replicas"] = min_replicas
    else:
        settings["autoscaling_config"] = {
            "min_replicas": min_replicas,
            "max_replicas": max_replicas,
            # Read by the policy as the pending requests to aim for per replica.
            "target_ongoing_requests": target_pending_requests,
            "policy": {"policy_function": POLICY},
            **(autoscaling_options or {}),
        }
    settings.update(deployment_options or {})
    return NaiadReplica.options(**settings).bind(options, max_input_size, direct)


class AppArgs(BaseModel):
    """The arguments `serve run naiad_ray:app_builder key=value ...` and Serve config files
    (`import_path: naiad_ray:app_builder`, `args:`) pass; the names of `build_app`'s."""

    model_repository: str | list[str]
    http_port: int | None = 8000
    grpc_port: int | None = 8001
    host: str = "0.0.0.0"
    min_replicas: int = 1
    max_replicas: int = 1
    target_pending_requests: float = 32
    max_ongoing_requests: int = 256
    max_queued_requests: int = 1024
    num_cpus: float = 1
    num_gpus: float | None = None
    autoscaling_options: dict[str, Any] | None = None
    max_input_size: int = DEFAULT_MAX_INPUT_SIZE


def app_builder(args: AppArgs) -> Application:
    """Ray Serve's application-builder form of `build_app`."""
    return build_app(**args.model_dump())
