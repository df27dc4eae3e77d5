"""naiad on Ray Serve: replicas of the in-process naiad server behind Ray Serve's HTTP
proxy, speaking the KServe v2 protocol (see docs/ray.md)."""

from .app import AppArgs, app_builder, build_app
from .gpus import gpus_per_replica
from .replica import NaiadReplica

__all__ = ["AppArgs", "NaiadReplica", "app_builder", "build_app", "gpus_per_replica"]
