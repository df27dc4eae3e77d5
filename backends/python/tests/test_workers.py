"""`naiad serve --workers N`: several server processes share the HTTP and gRPC ports.

The model answers with the process id of the interpreter that ran it (in-process mode, so
that is the worker's own), which shows that connections reach more than one worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from naiad.testing import ServerProcess

PID_MODEL = textwrap.dedent('''
    import os
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))]) for _ in requests]
''')

PID_CONFIG = '''
name: "pid"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] } ]
parameters { key: "execution_mode" value: { string_value: "in_process" } }
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workers_repo")
    (root / "pid" / "1").mkdir(parents=True)
    (root / "pid" / "config.pbtxt").write_text(PID_CONFIG)
    (root / "pid" / "1" / "model.py").write_text(PID_MODEL)
    return root


def _http_pid(url: str) -> int:
    # A new client is a new connection, which the kernel may give to any worker.
    client = httpclient.InferenceServerClient(url)
    try:
        tensor = httpclient.InferInput("IN", [1], "INT64")
        tensor.set_data_from_numpy(np.array([1], dtype=np.int64))
        return int(client.infer("pid", [tensor]).as_numpy("PID")[0])
    finally:
        client.close()


def _grpc_pid(url: str) -> int:
    client = grpcclient.InferenceServerClient(url)
    try:
        tensor = grpcclient.InferInput("IN", [1], "INT64")
        tensor.set_data_from_numpy(np.array([1], dtype=np.int64))
        return int(client.infer("pid", [tensor]).as_numpy("PID")[0])
    finally:
        client.close()


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_two_workers_share_both_ports_and_stop_together(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2") as server:
        assert "worker 1 serves" in server.log()
        assert "(2 worker processes)" in server.log()
        assert server.process is not None
        # 40 new connections each: all on one worker would happen with probability 2**-39.
        http_pids = {_http_pid(server.http_url) for _ in range(40)}
        grpc_pids = {_grpc_pid(server.grpc_url) for _ in range(40)}
        assert len(http_pids) == 2 and server.process.pid in http_pids
        assert len(grpc_pids) == 2 and grpc_pids == http_pids
        # Readiness and metrics answer on every worker / worker 0.
        assert httpclient.InferenceServerClient(server.http_url).is_server_ready()
        worker = (http_pids - {server.process.pid}).pop()
        assert server.stop() == 0
    # SIGTERM to worker 0 stopped the other worker too.
    assert not _alive(worker)


def test_a_worker_that_exits_stops_the_server(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2") as server:
        pids = {_http_pid(server.http_url) for _ in range(40)}
        assert server.process is not None
        worker = (pids - {server.process.pid}).pop()
        subprocess.run(["kill", "-KILL", str(worker)], check=True)
        assert server.wait(60) == 1
        assert "a worker process exited" in server.log()


@pytest.mark.parametrize("flags, message", [
    (["--workers", "2", "--model-control-mode", "explicit"], "cannot be used with --model-control-mode explicit"),
    (["--workers", "0"], "--workers: must be at least 1"),
])
def test_workers_refuse_what_they_cannot_keep_coherent(repo: Path, flags: list[str], message: str) -> None:
    result = subprocess.run([sys.executable, "-m", "naiad.cli", "serve", "--model-repository", str(repo), *flags],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr


def test_workers_stop_when_worker_0_is_killed(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2") as server:
        assert server.process is not None
        pids = {_http_pid(server.http_url) for _ in range(40)}
        worker = (pids - {server.process.pid}).pop()
        server.process.kill()  # SIGKILL: worker 0 cannot forward anything
        server.process.wait()
        # The orphaned worker notices (it checks once a second) and exits on its own.
        deadline_polls = 600
        while deadline_polls and _alive(worker):
            deadline_polls -= 1
            time.sleep(0.1)
        assert deadline_polls > 0, "the worker kept running after worker 0 was killed"
        assert "worker 0 is gone" in server.log()
