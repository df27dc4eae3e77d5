"""A real local Ray cluster (head on 127.0.0.1, 2 CPUs, no dashboard) with Ray Serve's HTTP
proxy on a free loopback port, shared by the tests of this directory."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from naiad.testing import free_port


def pytest_configure(config: pytest.Config) -> None:
    # Read by Ray when it is imported (the tests import it later): the node then uses the
    # loopback address for everything instead of the machine's routable one, and sends no
    # usage statistics.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"


@pytest.fixture(scope="session")
def serve_url() -> Iterator[str]:
    """host:port of Ray Serve's HTTP proxy on a fresh local cluster. The cluster declares one
    GPU as a logical resource (no device needed) so that GPU requests can be seen."""
    import ray
    from ray import serve

    ray.init(
        address="local",
        num_cpus=2,
        num_gpus=1,
        include_dashboard=False,
        object_store_memory=80 * 1024 * 1024,
        log_to_driver=False,
    )
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        yield f"127.0.0.1:{port}"
        serve.shutdown()
    finally:
        ray.shutdown()
