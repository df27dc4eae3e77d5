"""`naiad serve --workers N`: several server processes share the HTTP and gRPC ports and stay
one server (naiad.workers).

The models answer with the process id of the interpreter that ran them (in-process mode, so
that is the worker's own), which shows which worker a connection reached. Every helper opens
a new connection (a new client), which the kernel may give to any worker."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from geventhttpclient.response import HTTPConnectionClosed
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess

PID_MODEL = textwrap.dedent("""
    import os
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))]) for _ in requests]
""")


def pid_config(name: str, extra: str = "") -> str:
    return f'''
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_INT64 dims: [ 1 ] }} ]
output [ {{ name: "PID" data_type: TYPE_INT64 dims: [ 1 ] }} ]
parameters {{ key: "execution_mode" value: {{ string_value: "in_process" }} }}
{extra}
'''


# A running sum per sequence, kept in the model's own memory: only the process that saw the
# sequence's earlier requests knows it.
ACCUMULATE_MODEL = textwrap.dedent("""
    import os
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.sums = {}

        def execute(self, requests):
            responses = []
            for request in requests:
                value = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
                key = request.correlation_id()
                start = request.flags() & 1
                total = value + (0 if start else self.sums.get(key, 0))
                self.sums[key] = total
                responses.append(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("SUM", np.array([total], dtype=np.int64)),
                    pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))]))
            return responses
""")

ACCUMULATE_CONFIG = """
name: "accumulate"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 1 ] } ]
output [ { name: "SUM" data_type: TYPE_INT64 dims: [ 1 ] }, { name: "PID" data_type: TYPE_INT64 dims: [ 1 ] } ]
sequence_batching { max_sequence_idle_microseconds: 60000000 }
parameters { key: "execution_mode" value: { string_value: "in_process" } }
"""

# New connections per check: with two workers, all on one happens with probability 2**-(n-1).
CONNECTIONS = 24


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workers_repo")
    for name in ("pid", "late", "counted"):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(pid_config(name))
        (root / name / "1" / "model.py").write_text(PID_MODEL)
    (root / "accumulate" / "1").mkdir(parents=True)
    (root / "accumulate" / "config.pbtxt").write_text(ACCUMULATE_CONFIG)
    (root / "accumulate" / "1" / "model.py").write_text(ACCUMULATE_MODEL)
    return root


@pytest.fixture(scope="module")
def coherent(repo: Path):
    """Two workers, explicit model control, client shared memory allowed."""
    with ServerProcess(
        repo,
        "--workers",
        "2",
        "--model-control-mode",
        "explicit",
        "--load-model",
        "pid",
        "--load-model",
        "counted",
        "--load-model",
        "accumulate",
        "--allow-client-shm",
        "true",
    ) as server:
        yield server


def _int64(client_module: Any, value: int) -> Any:
    tensor = client_module.InferInput("IN", [1], "INT64")
    tensor.set_data_from_numpy(np.array([value], dtype=np.int64))
    return tensor


def on_new_http(url: str, call: Callable[[httpclient.InferenceServerClient], Any]) -> Any:
    client = httpclient.InferenceServerClient(url)
    try:
        return call(client)
    finally:
        client.close()


def on_new_grpc(url: str, call: Callable[[grpcclient.InferenceServerClient], Any]) -> Any:
    client = grpcclient.InferenceServerClient(url)
    try:
        return call(client)
    finally:
        client.close()


def http_pid(url: str, model: str = "pid") -> int:
    return on_new_http(url, lambda c: int(c.infer(model, [_int64(httpclient, 1)]).as_numpy("PID")[0]))


def grpc_pid(url: str, model: str = "pid") -> int:
    return on_new_grpc(url, lambda c: int(c.infer(model, [_int64(grpcclient, 1)]).as_numpy("PID")[0]))


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_two_workers_share_both_ports_and_stop_together(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2") as server:
        assert "worker 1 serves" in server.log()
        assert "(2 worker processes)" in server.log()
        assert server.process is not None
        http_pids = {http_pid(server.http_url) for _ in range(CONNECTIONS)}
        grpc_pids = {grpc_pid(server.grpc_url) for _ in range(CONNECTIONS)}
        assert len(http_pids) == 2 and server.process.pid in http_pids
        assert grpc_pids == http_pids
        worker = (http_pids - {server.process.pid}).pop()
        assert server.stop() == 0
    # SIGTERM to worker 0 stopped the other worker too.
    assert not _alive(worker)


def test_open_connections_are_spread_evenly_over_the_workers(coherent: ServerProcess) -> None:
    """The kernel hashes each new connection to a worker, which splits 8 clients 6/2 or worse
    as often as 4/4; a worker holding more connections than another passes the new one on.
    Clients opened one after another, and held open, end up 4 and 4 on each protocol, and
    again once the first ones have closed."""
    for _ in range(2):
        http_clients = [httpclient.InferenceServerClient(coherent.http_url) for _ in range(8)]
        # grpcio shares one connection between channels to the same target unless told not to.
        grpc_clients = [
            grpcclient.InferenceServerClient(coherent.grpc_url, channel_args=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(8)
        ]
        try:
            http_pids = [int(c.infer("pid", [_int64(httpclient, 1)]).as_numpy("PID")[0]) for c in http_clients]
            grpc_pids = [int(c.infer("pid", [_int64(grpcclient, 1)]).as_numpy("PID")[0]) for c in grpc_clients]
            assert sorted(http_pids.count(pid) for pid in set(http_pids)) == [4, 4], http_pids
            assert sorted(grpc_pids.count(pid) for pid in set(grpc_pids)) == [4, 4], grpc_pids
            # A connection passed on serves every later request where it landed.
            assert [int(c.infer("pid", [_int64(httpclient, 1)]).as_numpy("PID")[0]) for c in http_clients] == http_pids
        finally:
            for client in (*http_clients, *grpc_clients):
                client.close()
        time.sleep(0.5)  # the workers see the connections close


def test_explicit_load_over_http_is_seen_through_grpc_by_every_worker(coherent: ServerProcess) -> None:
    config = {
        "name": "late",
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
        "output": [{"name": "PID", "data_type": "TYPE_INT64", "dims": [1]}],
        "parameters": {"execution_mode": {"string_value": "in_process"}, "tag": {"string_value": "override"}},
    }
    on_new_http(coherent.http_url, lambda c: c.load_model("late", config=json.dumps(config)))
    pids = set()
    for _ in range(CONNECTIONS):

        def check(client: grpcclient.InferenceServerClient) -> int:
            assert client.is_model_ready("late")
            assert client.get_model_config("late").config.parameters["tag"].string_value == "override"
            assert {m.name for m in client.get_model_repository_index().models if m.state == "READY"} >= {"late"}
            return int(client.infer("late", [_int64(grpcclient, 1)]).as_numpy("PID")[0])

        pids.add(on_new_grpc(coherent.grpc_url, check))
    assert len(pids) == 2

    # Unloaded through gRPC: no worker serves it any more.
    on_new_grpc(coherent.grpc_url, lambda c: c.unload_model("late"))
    assert not any(on_new_http(coherent.http_url, lambda c: c.is_model_ready("late")) for _ in range(CONNECTIONS))


def test_a_model_uploaded_over_grpc_is_served_by_every_worker(coherent: ServerProcess) -> None:
    files = {"file:1/model.py": PID_MODEL.encode()}
    config = json.dumps(
        {
            "name": "uploaded",
            "backend": "python",
            "max_batch_size": 0,
            "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
            "output": [{"name": "PID", "data_type": "TYPE_INT64", "dims": [1]}],
            "parameters": {"execution_mode": {"string_value": "in_process"}},
        }
    )
    on_new_grpc(coherent.grpc_url, lambda c: c.load_model("uploaded", config=config, files=files))
    assert len({http_pid(coherent.http_url, "uploaded") for _ in range(CONNECTIONS)}) == 2
    on_new_http(coherent.http_url, lambda c: c.unload_model("uploaded"))


def test_statistics_and_metrics_count_every_worker(coherent: ServerProcess) -> None:
    for _ in range(8):  # 8 connections, 5 requests each
        on_new_http(coherent.http_url, lambda c: [c.infer("counted", [_int64(httpclient, 1)]) for _ in range(5)])
    for _ in range(4):  # any connection, either protocol, reads the whole server
        stats = on_new_http(coherent.http_url, lambda c: c.get_inference_statistics("counted"))["model_stats"][0]
        assert stats["inference_count"] == 40
        assert stats["inference_stats"]["success"]["count"] == 40
        grpc_stats = on_new_grpc(coherent.grpc_url, lambda c: c.get_inference_statistics("counted"))
        assert grpc_stats.model_stats[0].inference_stats.success.count == 40
    with urllib.request.urlopen(coherent.metrics_url, timeout=10) as answer:
        metrics = answer.read().decode()
    assert re.search(r'^nv_inference_request_success\{model="counted",version="1"\} 40$', metrics, re.M), metrics
    assert re.search(r'^nv_inference_count\{model="counted",version="1"\} 40$', metrics, re.M)
    # The machine's gauges appear once, not once per worker.
    assert len(re.findall(r"^nv_cpu_memory_total_bytes ", metrics, re.M)) <= 1


def test_a_shared_memory_region_registered_on_one_connection_serves_every_connection(coherent: ServerProcess) -> None:
    key = f"/naiad_workers_test_{os.getpid()}"
    handle = shm.create_shared_memory_region("workers_input", key, 8)
    try:
        shm.set_shared_memory_region(handle, [np.array([7], dtype=np.int64)])
        on_new_http(coherent.http_url, lambda c: c.register_system_shared_memory("workers_input", key, 8))
        pids = set()
        for _ in range(CONNECTIONS):

            def infer(client: grpcclient.InferenceServerClient) -> int:
                assert [r.name for r in client.get_system_shared_memory_status().regions.values()] == ["workers_input"]
                tensor = grpcclient.InferInput("IN", [1], "INT64")
                tensor.set_shared_memory("workers_input", 8)
                return int(client.infer("pid", [tensor]).as_numpy("PID")[0])

            pids.add(on_new_grpc(coherent.grpc_url, infer))
        assert len(pids) == 2
        on_new_grpc(coherent.grpc_url, lambda c: c.unregister_system_shared_memory("workers_input"))
        for _ in range(8):
            assert on_new_http(coherent.http_url, lambda c: c.get_system_shared_memory_status()) == []
    finally:
        shm.destroy_shared_memory_region(handle)


def test_a_sequence_sent_over_four_connections_keeps_its_state(coherent: ServerProcess) -> None:
    sequences = {101: [1, 2, 3, 4], 202: [10, 20, 30, 40], 303: [5, 5, 5, 5], 404: [2, 4, 6, 8]}
    owners: dict[int, int] = {}
    # One after the other: the model has one instance, so one sequence slot.
    for corrid, values in sequences.items():
        for step in range(4):
            start, end = step == 0, step == 3

            def send(client: Any, module: Any = grpcclient if step % 2 else httpclient) -> tuple[int, int]:
                result = client.infer(
                    "accumulate",
                    [_int64(module, values[step])],
                    sequence_id=corrid,
                    sequence_start=start,
                    sequence_end=end,
                )
                return int(result.as_numpy("SUM")[0]), int(result.as_numpy("PID")[0])

            total, pid = on_new_grpc(coherent.grpc_url, send) if step % 2 else on_new_http(coherent.http_url, send)
            assert total == sum(values[: step + 1]), (corrid, step)
            # Every request of a sequence ran in one process, its owner.
            assert owners.setdefault(corrid, pid) == pid


def test_log_and_trace_settings_changed_on_one_connection_hold_on_every_connection(coherent: ServerProcess) -> None:
    on_new_http(coherent.http_url, lambda c: c.update_log_settings({"log_verbose_level": 2}))
    on_new_grpc(coherent.grpc_url, lambda c: c.update_trace_settings(settings={"trace_rate": "7"}))
    try:
        for _ in range(CONNECTIONS // 2):
            log_settings = on_new_grpc(coherent.grpc_url, lambda c: c.get_log_settings(as_json=True))
            assert log_settings["settings"]["log_verbose_level"]["uint32_param"] == 2
            assert on_new_http(coherent.http_url, lambda c: c.get_trace_settings())["trace_rate"] == "7"
    finally:
        on_new_http(coherent.http_url, lambda c: c.update_log_settings({"log_verbose_level": 0}))
        on_new_http(coherent.http_url, lambda c: c.update_trace_settings(settings={"trace_rate": "1000"}))


def test_a_killed_worker_is_started_again_with_what_clients_changed(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2", "--model-control-mode", "explicit", "--load-model", "pid") as server:
        assert server.process is not None
        on_new_http(server.http_url, lambda c: c.load_model("late"))
        for _ in range(8):  # each worker now holds a connection to the other
            on_new_http(server.http_url, lambda c: c.get_inference_statistics("pid"))
        worker = ({http_pid(server.http_url) for _ in range(CONNECTIONS)} - {server.process.pid}).pop()
        subprocess.run(["kill", "-KILL", str(worker)], check=True)
        assert _wait_for(lambda: not _alive(worker))
        # New connections are served while the worker is away (one the kernel had queued on
        # the dying worker's socket may be reset: a request in flight on the killed process)...
        answered = []
        for _ in range(8):
            try:
                answered.append(http_pid(server.http_url))
            except (ConnectionError, HTTPConnectionClosed):
                pass
        assert len(answered) >= 7 and set(answered) == {server.process.pid}
        # ...and it comes back, with the model a client loaded after start-up.
        assert _wait_for(lambda: "worker 1 serves again" in server.log())
        pids = {http_pid(server.http_url, "late") for _ in range(CONNECTIONS)}
        assert len(pids) == 2 and worker not in pids
        assert "worker 1 replayed 1 change(s)" in server.log()
        # Whichever worker receives it, an unload reaches the new worker too.
        for _ in range(4):
            on_new_http(server.http_url, lambda c: c.load_model("late"))
            on_new_http(server.http_url, lambda c: c.unload_model("late"))
            assert not any(on_new_http(server.http_url, lambda c: c.is_model_ready("late")) for _ in range(8))
        assert server.stop() == 0


def test_every_worker_traces_into_one_trace_file(repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    with ServerProcess(
        repo,
        "--workers",
        "2",
        "--trace-config",
        "level=TIMESTAMPS",
        "--trace-config",
        "rate=1",
        "--trace-config",
        f"file={path}",
    ) as server:
        assert len({http_pid(server.http_url) for _ in range(CONNECTIONS)}) == 2
        assert server.stop() == 0
    traces = json.loads(path.read_text())
    assert len([t for t in traces if t.get("model_name") == "pid"]) == CONNECTIONS


def test_poll_mode_follows_the_repository_on_every_worker(tmp_path: Path) -> None:
    # Worker 0 scans, then has the others scan: none of them polls on its own.
    (tmp_path / "pid" / "1").mkdir(parents=True)
    (tmp_path / "pid" / "config.pbtxt").write_text(pid_config("pid"))
    (tmp_path / "pid" / "1" / "model.py").write_text(PID_MODEL)
    with ServerProcess(
        tmp_path, "--workers", "2", "--model-control-mode", "poll", "--repository-poll-secs", "0.5"
    ) as server:
        (tmp_path / "added" / "1").mkdir(parents=True)
        (tmp_path / "added" / "1" / "model.py").write_text(PID_MODEL)
        (tmp_path / "added" / "config.pbtxt").write_text(pid_config("added"))
        assert _wait_for(lambda: on_new_http(server.http_url, lambda c: c.is_model_ready("added")))

        def every_worker_serves_it() -> bool:
            try:
                return len({http_pid(server.http_url, "added") for _ in range(CONNECTIONS)}) == 2
            except InferenceServerException:
                return False

        assert _wait_for(every_worker_serves_it, 10)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--workers", "2", "--http-port", "0"], "--workers > 1 needs fixed --http-port and --grpc-port"),
        (["--workers", "0"], "--workers: must be at least 1"),
    ],
)
def test_workers_refuse_what_they_cannot_keep_coherent(repo: Path, flags: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "naiad.cli", "serve", "--model-repository", str(repo), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert message in result.stderr


def test_the_default_is_one_worker_per_core_and_one_with_an_ephemeral_port(repo: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    with ServerProcess(repo, "--model-control-mode", "explicit", "--load-model", "pid", workers=None) as server:
        assert (f"({cores} worker processes)" in server.log()) == (cores > 1)
    with ServerProcess(
        repo, "--model-control-mode", "explicit", "--load-model", "pid", "--grpc-port", "0", workers=None
    ) as server:
        assert "worker processes)" not in server.log()
        assert "naiad is ready" in server.log()


def test_a_server_on_a_taken_port_fails_instead_of_sharing_it(repo: Path, coherent: ServerProcess) -> None:
    # The workers bind with SO_REUSEPORT, which would let a second server of the same user
    # join the port: naiad looks first and then refuses the port as one process would.
    second = ServerProcess(repo, "--http-port", str(coherent.http_port), workers=None)
    second.start(expect_ready=False)
    try:
        assert second.wait(60) != 0
        assert f"cannot listen on 127.0.0.1:{coherent.http_port}" in second.log()
    finally:
        second.__exit__()


def test_workers_stop_when_worker_0_is_killed(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2", "--model-control-mode", "explicit", "--load-model", "pid") as server:
        assert server.process is not None
        pids = {http_pid(server.http_url) for _ in range(CONNECTIONS)}
        worker = (pids - {server.process.pid}).pop()
        server.process.kill()  # SIGKILL: worker 0 cannot forward anything
        server.process.wait()
        # The orphaned worker notices (it checks once a second) and exits on its own.
        assert _wait_for(lambda: not _alive(worker)), "the worker kept running after worker 0 was killed"
        assert "worker 0 is gone" in server.log()


def _threads(pid: int) -> list[int]:
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]


def _children(pid: int) -> list[int]:
    return [
        int(child) for tid in _threads(pid) for child in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
    ]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _loop_pinned(worker: int) -> bool:
    return len(os.sched_getaffinity(worker)) == 1


@contextlib.contextmanager
def _children_on(cpus: set[int]) -> Iterator[None]:
    """A process started meanwhile from this thread may use only `cpus`: it inherits them."""
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, own)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning two event loops needs two usable CPUs")
def test_each_worker_loop_runs_on_a_cpu_of_its_own_and_nothing_else_is_pinned(tmp_path: Path) -> None:
    # Two workers pin only when they are one per usable CPU (the default layout): the server
    # is given two CPUs, whatever the machine has.
    ordered = sorted(os.sched_getaffinity(0))[:2]
    usable = set(ordered)
    (tmp_path / "pid" / "1").mkdir(parents=True)
    (tmp_path / "pid" / "config.pbtxt").write_text(pid_config("pid"))
    (tmp_path / "pid" / "1" / "model.py").write_text(PID_MODEL)
    # The same model in a process of its own (the default execution mode): the PID is the stub's.
    (tmp_path / "isolated" / "1").mkdir(parents=True)
    (tmp_path / "isolated" / "config.pbtxt").write_text(pid_config("isolated").replace("in_process", "process"))
    (tmp_path / "isolated" / "1" / "model.py").write_text(PID_MODEL)

    def check(server: ServerProcess, workers: set[int]) -> None:
        assert len(workers) == 2
        # Each worker pins its loop once it serves; its health may answer a moment before.
        assert _wait_for(lambda: all(_loop_pinned(w) for w in workers)), "an event loop was not pinned"
        assert {frozenset(os.sched_getaffinity(w)) for w in workers} == {
            frozenset({ordered[0]}),
            frozenset({ordered[1]}),
        }
        for worker in workers:
            others = [tid for tid in _threads(worker) if tid != worker]
            assert others and all(os.sched_getaffinity(tid) == usable for tid in others), (
                "a thread besides the loop was pinned"
            )
        stubs = {http_pid(server.http_url, "isolated") for _ in range(CONNECTIONS)}
        assert len(stubs) == 2 and not stubs & workers
        for stub in stubs:
            # Forked by its worker's stub template, a child of the worker (docs/backends/python.md).
            assert any(_parent(stub) in _children(w) for w in workers)
            assert all(os.sched_getaffinity(tid) == usable for tid in _threads(stub)), "a model's process was pinned"

    with _children_on(usable):
        pinned = ServerProcess(tmp_path, "--workers", "2").start()
    with pinned as server:
        assert server.process is not None
        workers = {http_pid(server.http_url) for _ in range(CONNECTIONS)}
        check(server, workers)
        assert re.search(
            r"pin_loop_threads\s*\|\s*one CPU per worker, over CPUs " + ", ".join(map(str, ordered)), server.log()
        )
        # A worker started again by worker 0's pinned loop does not inherit its CPU.
        worker = (workers - {server.process.pid}).pop()
        subprocess.run(["kill", "-KILL", str(worker)], check=True)
        assert _wait_for(lambda: "worker 1 serves again" in server.log())
        restarted = {http_pid(server.http_url) for _ in range(CONNECTIONS)}
        assert worker not in restarted
        check(server, restarted)
        assert server.stop() == 0
    with _children_on(usable):
        unpinned = ServerProcess(tmp_path, "--workers", "2", "--pin-loop-threads", "off").start()
    with unpinned as server:
        workers = {http_pid(server.http_url) for _ in range(CONNECTIONS)}
        assert len(workers) == 2 and all(os.sched_getaffinity(w) == usable for w in workers)
        assert re.search(r"pin_loop_threads\s*\|\s*no\s", server.log())
        assert server.stop() == 0
