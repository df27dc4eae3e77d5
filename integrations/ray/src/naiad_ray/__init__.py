"""naiad on Ray Serve: replicas of the in-process naiad server, each serving naiad's own
HTTP/1.1 and gRPC servers on its node's shared ports (or behind Ray Serve's HTTP proxy),
placed, restarted and autoscaled on naiad's queue by Ray Serve (see docs/ray.md)."""

from .app import AppArgs, app_builder, build_app
from .gpus import gpus_per_replica
from .replica import NaiadReplica

__all__ = ["AppArgs", "NaiadReplica", "app_builder", "build_app", "gpus_per_replica"]
