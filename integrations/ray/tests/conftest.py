"""A real local Ray cluster (head on 127.0.0.1, 2 CPUs, no dashboard) with Ray Serve's HTTP
proxy on a free loopback port, shared by the tests of this directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from naiad.testing import free_port

# A Python model that answers the sum of its inputs and the process id of the naiad server
# that ran it (its stub's parent: the Ray Serve replica), so a test sees which replica
# answered. SLEEP_S slows each execution down, to build a queue.
PID_MODEL = """
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        time.sleep({sleep_s})
        replica = np.array([[os.getppid()]], dtype=np.int64)
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            pid = np.repeat(replica, a.shape[0], axis=0)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", a + b), pb_utils.Tensor("PID", pid)]))
        return responses
"""

PID_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "PID" data_type: TYPE_INT64 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: {kind} }} ]
"""


def write_pid_model(repository: Path, name: str, sleep_s: float = 0.0, kind: str = "KIND_CPU") -> None:
    version = repository / name / "1"
    version.mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(PID_CONFIG.format(name=name, kind=kind))
    (version / "model.py").write_text(PID_MODEL.format(sleep_s=sleep_s))


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
        address="local", num_cpus=2, num_gpus=1, include_dashboard=False,
        object_store_memory=80 * 1024 * 1024, log_to_driver=False,
    )
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        yield f"127.0.0.1:{port}"
        serve.shutdown()
    finally:
        ray.shutdown()
