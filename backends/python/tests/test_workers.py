"""`naiad serve --workers N`: several worker processes share the HTTP and gRPC ports, every
model lives once in the model home, and they stay one server (naiad.workers).

The models answer with the process id of the interpreter that ran them (in-process mode, so
that is the model home's), which shows where a request ran. Every helper opens a new
connection (a new client), which the kernel may give to any worker."""

from __future__ import annotations

import asyncio
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
import psutil
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from geventhttpclient.response import HTTPConnectionClosed
from python_backend_servers import process_alive
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


def _wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _http_connections(pid: int, port: int) -> int:
    """Established connections process `pid` holds on its listening `port`."""
    return sum(
        1
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port
    )


def test_two_workers_share_both_ports_and_stop_together(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2") as server:
        assert "worker 1 serves" in server.log()
        assert "(2 worker processes)" in server.log()
        workers, home = server.worker_pids(), server.model_home_pid()
        # Worker 0 supervises; worker 1 is the model home, and serves connections too.
        assert len(workers) == 2 and home == workers[1]
        # Each line once: a process forked from worker 0 logs through its own handler only.
        assert server.log().count("successfully loaded 'pid'") == 1
        # The model (in-process mode: it answers with the pid of the process that runs it)
        # lives in the model home, whichever worker a connection reached.
        assert {http_pid(server.http_url) for _ in range(CONNECTIONS)} == {home}
        assert {grpc_pid(server.grpc_url) for _ in range(CONNECTIONS)} == {home}
        # Both workers hold connections.
        clients = [httpclient.InferenceServerClient(server.http_url) for _ in range(8)]
        try:
            for client in clients:
                client.infer("pid", [_int64(httpclient, 1)])
            assert all(_http_connections(pid, server.http_port) > 0 for pid in workers)
        finally:
            for client in clients:
                client.close()
        assert server.stop() == 0
    # SIGTERM to worker 0 stopped the other worker and the model home too.
    assert not any(process_alive(pid) for pid in [*workers, home])


def test_open_connections_are_spread_evenly_over_the_workers(coherent: ServerProcess) -> None:
    """The kernel hashes each new connection to a worker, which splits 8 clients 6/2 or worse
    as often as 4/4; a worker holding more connections than another passes the new one on.
    Clients opened one after another, and held open, end up 4 and 4 on each protocol, and
    again once the first ones have closed."""
    workers = coherent.worker_pids()
    for _ in range(2):
        http_clients = [httpclient.InferenceServerClient(coherent.http_url) for _ in range(8)]
        # grpcio shares one connection between channels to the same target unless told not to.
        grpc_clients = [
            grpcclient.InferenceServerClient(coherent.grpc_url, channel_args=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(8)
        ]
        try:
            for _ in range(2):  # a connection passed on serves every later request where it landed
                for http in http_clients:
                    http.infer("pid", [_int64(httpclient, 1)])
                for grpc in grpc_clients:
                    grpc.infer("pid", [_int64(grpcclient, 1)])
                assert sorted(_http_connections(pid, coherent.http_port) for pid in workers) == [4, 4]
                assert sorted(_http_connections(pid, coherent.grpc_port) for pid in workers) == [4, 4]
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
    for _ in range(CONNECTIONS):  # new connections, on both workers

        def check(client: grpcclient.InferenceServerClient) -> int:
            assert client.is_model_ready("late")
            assert client.get_model_config("late").config.parameters["tag"].string_value == "override"
            assert {m.name for m in client.get_model_repository_index().models if m.state == "READY"} >= {"late"}
            return int(client.infer("late", [_int64(grpcclient, 1)]).as_numpy("PID")[0])

        pids.add(on_new_grpc(coherent.grpc_url, check))
    assert pids == {coherent.model_home_pid()}

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
    assert {http_pid(coherent.http_url, "uploaded") for _ in range(CONNECTIONS)} == {coherent.model_home_pid()}
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
        assert pids == {coherent.model_home_pid()}
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
            # Every request of a sequence ran in the one process that holds the model.
            assert owners.setdefault(corrid, pid) == pid == coherent.model_home_pid()


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
    key = f"/naiad_workers_restart_{os.getpid()}"
    handle = shm.create_shared_memory_region("restart_input", key, 8)
    shm.set_shared_memory_region(handle, [np.array([3], dtype=np.int64)])
    try:
        with ServerProcess(
            repo, "--workers", "3", "--model-control-mode", "explicit", "--allow-client-shm", "true"
        ) as server:
            on_new_http(server.http_url, lambda c: c.load_model("late"))
            on_new_http(server.http_url, lambda c: c.register_system_shared_memory("restart_input", key, 8))
            worker = server.front_door_pids()[1]  # worker 2: neither worker 0 nor the model home
            subprocess.run(["kill", "-KILL", str(worker)], check=True)
            assert _wait_for(lambda: not process_alive(worker))
            # New connections are served while the worker is away (one the kernel had queued on
            # the dying worker's socket may be reset: a request in flight on the killed process)...
            answered = []
            for _ in range(8):
                try:
                    answered.append(http_pid(server.http_url, "late"))
                except (ConnectionError, HTTPConnectionClosed):
                    pass
            assert len(answered) >= 7 and set(answered) == {server.model_home_pid()}
            # ...and it comes back with what clients changed since start-up: its own share
            # (the region) replayed, the model served by the model home all along.
            assert _wait_for(lambda: "worker 2 serves again" in server.log())
            assert "worker 2 replayed 2 change(s)" in server.log()
            assert worker not in server.worker_pids()

            def infer_from_region(client: grpcclient.InferenceServerClient) -> int:
                tensor = grpcclient.InferInput("IN", [1], "INT64")
                tensor.set_shared_memory("restart_input", 8)
                return int(client.infer("late", [tensor]).as_numpy("PID")[0])

            assert {on_new_grpc(server.grpc_url, infer_from_region) for _ in range(CONNECTIONS)} == {
                server.model_home_pid()
            }
            # Whichever worker receives it, an unload is the whole server's.
            for _ in range(4):
                on_new_http(server.http_url, lambda c: c.load_model("late"))
                on_new_http(server.http_url, lambda c: c.unload_model("late"))
                assert not any(on_new_http(server.http_url, lambda c: c.is_model_ready("late")) for _ in range(8))
            assert server.stop() == 0
    finally:
        shm.destroy_shared_memory_region(handle)


def test_a_killed_model_home_is_started_again_with_the_models_and_trace_settings_clients_changed(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2", "--model-control-mode", "explicit", "--load-model", "pid") as server:
        on_new_http(server.http_url, lambda c: c.load_model("late"))
        on_new_http(server.http_url, lambda c: c.update_trace_settings(settings={"trace_rate": "7"}))
        home = server.model_home_pid()
        assert home is not None
        subprocess.run(["kill", "-KILL", str(home)], check=True)
        assert _wait_for(lambda: not process_alive(home))
        # Meanwhile worker 0 holds the request until the new model home serves, or says why
        # it could not (a connection the kernel had queued on the killed process's socket is
        # reset).
        try:
            http_pid(server.http_url, "late")
        except InferenceServerException as exc:
            assert "model home" in str(exc) or "not available" in str(exc)
        except (ConnectionError, HTTPConnectionClosed):
            pass
        assert _wait_for(lambda: "the model home serves again" in server.log())
        assert "the model home replayed 2 change(s)" in server.log()
        restarted = server.model_home_pid()
        assert restarted not in (None, home)

        def served_by_the_new_home() -> bool:
            try:
                return {http_pid(server.http_url, m) for m in ("pid", "late") for _ in range(4)} == {restarted}
            except (InferenceServerException, ConnectionError, HTTPConnectionClosed):
                return False  # worker 0 has not connected again yet

        assert _wait_for(served_by_the_new_home, 10)
        assert on_new_http(server.http_url, lambda c: c.get_trace_settings())["trace_rate"] == "7"
        assert server.stop() == 0


SLOW_START_MODEL = PID_MODEL.replace(
    "class TritonPythonModel:",
    "import time\n\nclass TritonPythonModel:\n    def initialize(self, args):\n        time.sleep(2)\n",
)


def test_requests_that_reach_a_front_door_while_the_model_home_is_away_wait_for_it(tmp_path: Path) -> None:
    """A crash of the model home costs the requests it held, not those that arrive while it
    is started again: the front door holds them (its model takes 2 s to load here) and sends
    them to the new model home, where before it answered 503 at once."""
    (tmp_path / "slow_start" / "1").mkdir(parents=True)
    (tmp_path / "slow_start" / "config.pbtxt").write_text(pid_config("slow_start"))
    (tmp_path / "slow_start" / "1" / "model.py").write_text(SLOW_START_MODEL)
    with ServerProcess(tmp_path, "--workers", "2") as server:
        worker_0, home = server.worker_pids()[0], server.model_home_pid()
        assert home is not None
        clients = [httpclient.InferenceServerClient(server.http_url) for _ in range(8)]
        try:
            for client in clients:
                client.infer("slow_start", [_int64(httpclient, 1)])
            on_front_door = _http_connections(worker_0, server.http_port)
            assert on_front_door >= 1
            subprocess.run(["kill", "-KILL", str(home)], check=True)
            # Sent once the front door knows (a request it sent to the dying model home is lost).
            assert _wait_for(lambda: "the model home went away" in server.log())
            sent = time.monotonic()

            # All at once (tritonclient's HTTP client sends asynchronously on gevent).
            pending = [client.async_infer("slow_start", [_int64(httpclient, 1)]) for client in clients]
            outcomes: list[tuple[str, Any, float]] = []
            for request in pending:
                try:
                    answer = request.get_result()
                    outcomes.append(("answered", int(answer.as_numpy("PID")[0]), time.monotonic() - sent))
                except (ConnectionError, HTTPConnectionClosed) as exc:
                    outcomes.append(("connection lost", exc, 0.0))  # it was on the killed model home
                except InferenceServerException as exc:
                    outcomes.append(("refused", exc, 0.0))
            restarted = server.model_home_pid()
            assert [str(o[1]) for o in outcomes if o[0] == "refused"] == []
            answered = [o for o in outcomes if o[0] == "answered"]
            # Those on the front door at least; a client whose connection was on the killed
            # model home may connect again, to the front door, and be held there too.
            assert len(answered) >= on_front_door, outcomes
            # Served by the new model home, once it had loaded the model.
            assert {pid for _, pid, _ in answered} == {restarted} and restarted != home
            assert min(waited for _, _, waited in answered) >= 1.0
        finally:
            for client in clients:
                client.close()
        assert server.stop() == 0


def test_a_killed_model_home_is_forked_again_and_its_clients_spread_again(repo: Path) -> None:
    """The new model home is forked from the fork server worker 0 made at start (a new
    interpreter takes seconds to import naiad under load), worker 0's child as the first
    one; and the clients that moved to worker 0 while the model home was away spread over
    both workers again once it is back (with every request crossing from worker 0 to the
    model home, a two-worker server is slower; docs/reliability.md)."""
    with ServerProcess(repo, "--workers", "2") as server:
        worker_0, home = server.worker_pids()[0], server.model_home_pid()
        assert home is not None
        clients = [httpclient.InferenceServerClient(server.http_url) for _ in range(8)]
        try:

            def send_on_each() -> int:
                answered = 0
                for client in clients:
                    with contextlib.suppress(InferenceServerException, ConnectionError, HTTPConnectionClosed):
                        client.infer("pid", [_int64(httpclient, 1)])
                        answered += 1
                return answered

            send_on_each()
            assert sorted(_http_connections(pid, server.http_port) for pid in (worker_0, home)) == [4, 4]
            subprocess.run(["kill", "-KILL", str(home)], check=True)
            assert _wait_for(lambda: not process_alive(home))
            assert _wait_for(lambda: send_on_each() == 8 and server.model_home_pid() not in (None, home), 30)
            restarted = server.model_home_pid()
            assert restarted is not None
            assert _parent(restarted) == worker_0
            # Forked: worker 0's own command line, without the flags a new interpreter gets.
            assert psutil.Process(restarted).cmdline() == psutil.Process(worker_0).cmdline()

            counts: list[int] = []

            def spread() -> bool:
                # Within the balancer's slack: a process moves connections on once it holds
                # two more than its share of 4, so 5/3 is as settled as 4/4.
                send_on_each()
                counts[:] = [_http_connections(pid, server.http_port) for pid in (worker_0, restarted)]
                return sorted(counts) in ([3, 5], [4, 4])

            assert _wait_for(spread, 15), counts
            assert send_on_each() == 8
        finally:
            for client in clients:
                client.close()
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
        assert {http_pid(server.http_url) for _ in range(CONNECTIONS)} == {server.model_home_pid()}
        assert server.stop() == 0
    traces = json.loads(path.read_text())
    assert len([t for t in traces if t.get("model_name") == "pid"]) == CONNECTIONS


@pytest.mark.slow
def test_poll_mode_follows_the_repository_on_every_worker(tmp_path: Path) -> None:
    # The model home scans; every worker sees what it loaded.
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

        assert {http_pid(server.http_url, "added") for _ in range(CONNECTIONS)} == {server.model_home_pid()}


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


@pytest.mark.slow
def test_the_default_is_one_worker_per_cpu_and_one_with_an_ephemeral_port(repo: Path) -> None:
    cpus = len(os.sched_getaffinity(0))  # the machines that run this have no cgroup CPU limit below it
    with ServerProcess(repo, "--model-control-mode", "explicit", "--load-model", "pid", workers=None) as server:
        # Two CPUs or fewer: one process (faster there than a model home and front doors).
        assert (f"({cpus} worker processes)" in server.log()) == (cpus > 2)
        assert len(server.worker_pids()) == (cpus if cpus > 2 else 1)
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


def test_a_model_home_that_cannot_load_its_models_stops_the_server(tmp_path: Path) -> None:
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "config.pbtxt").write_text(pid_config("broken"))
    (tmp_path / "broken" / "1" / "model.py").write_text("raise RuntimeError('this model cannot load')\n")
    server = ServerProcess(tmp_path, "--workers", "2", workers=None)
    server.start(expect_ready=False)
    try:
        assert server.wait(60) == 1
        log = server.log()
        assert "this model cannot load" in log
        assert "the model home did not start" in log
        assert "naiad is ready" not in log
    finally:
        server.__exit__()


def test_workers_stop_when_worker_0_is_killed(repo: Path) -> None:
    with ServerProcess(repo, "--workers", "2", "--model-control-mode", "explicit", "--load-model", "pid") as server:
        assert server.process is not None
        worker, home = server.worker_pids()[1], server.model_home_pid()
        assert worker == home is not None
        server.process.kill()  # SIGKILL: worker 0 cannot forward anything
        server.process.wait()
        # The orphaned model home stops on its own (the kernel tells it: PR_SET_PDEATHSIG).
        assert _wait_for(lambda: not process_alive(home), 5), "the model home kept running after worker 0 was killed"
        assert "shutting down" in server.log()


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


@pytest.mark.slow
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

    def check(server: ServerProcess) -> None:
        workers, home = server.worker_pids(), server.model_home_pid()
        assert len(workers) == 2 and home is not None
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
        # The model processes keep every CPU.
        stubs = {http_pid(server.http_url, "isolated") for _ in range(CONNECTIONS)}
        assert len(stubs) == 1 and not stubs & set(workers)
        for stub in stubs:
            # Forked by the model home's stub template (docs/backends/python.md).
            assert _parent(stub) in _children(home)
            assert all(os.sched_getaffinity(tid) == usable for tid in _threads(stub)), "a model's process was pinned"

    with _children_on(usable):
        pinned = ServerProcess(tmp_path, "--workers", "2").start()
    with pinned as server:
        check(server)
        assert re.search(
            r"pin_loop_threads\s*\|\s*one CPU per worker, over CPUs " + ", ".join(map(str, ordered)), server.log()
        )
        # A worker (here the model home) started again by worker 0's pinned loop does not
        # inherit its CPU.
        worker = server.worker_pids()[1]
        subprocess.run(["kill", "-KILL", str(worker)], check=True)
        assert _wait_for(lambda: "the model home serves again" in server.log())
        # The check below runs once the front door has connected to the new model home.
        assert _wait_for(lambda: "connected to the model home again" in server.log())
        assert worker not in server.worker_pids()
        check(server)
        assert server.stop() == 0
    with _children_on(usable):
        unpinned = ServerProcess(tmp_path, "--workers", "2", "--pin-loop-threads", "off").start()
    with unpinned as server:
        workers = server.worker_pids()
        assert len(workers) == 2 and all(os.sched_getaffinity(w) == usable for w in workers)
        assert re.search(r"pin_loop_threads\s*\|\s*no\s", server.log())
        assert server.stop() == 0


def _infer_body() -> bytes:
    return json.dumps({"inputs": [{"name": "IN", "datatype": "INT64", "shape": [1], "data": [1]}]}).encode()


async def _one_request(port: int, body: bytes) -> str:
    """One request on a new connection: its status line, or what went wrong."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (OSError, TimeoutError) as exc:
        return f"connect: {type(exc).__name__}"
    try:
        writer.write(
            b"POST /v2/models/pid/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        status = await asyncio.wait_for(reader.readline(), 10)
        return status.decode().strip() or "closed before an answer"
    except (OSError, TimeoutError) as exc:
        return f"lost: {type(exc).__name__}"
    finally:
        writer.close()


def test_connections_from_the_moment_ready_answers_are_all_served(repo: Path) -> None:
    """From the first 200 of /v2/health/ready, bursts of new connections while the other
    workers are still starting: none is reset or closed unanswered."""
    server = ServerProcess(repo, "--workers", "3", "--model-control-mode", "explicit", "--load-model", "pid")
    server.start(expect_ready=False)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{server.http_url}/v2/health/ready", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.01)

        async def bursts() -> list[str]:
            statuses: list[str] = []
            for _ in range(4):
                statuses += await asyncio.gather(*(_one_request(server.http_port, _infer_body()) for _ in range(64)))
            return statuses

        statuses = asyncio.run(bursts())
        failures = [status for status in statuses if not status.startswith("HTTP/1.1 200")]
        assert not failures, f"{len(failures)} of {len(statuses)}: {sorted(set(failures))}"
    finally:
        server.__exit__()


SLOW_MODEL = textwrap.dedent("""
    import time
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            time.sleep(60)

        def execute(self, requests):
            return []
""")


@pytest.mark.parametrize("moment", ["starting", "loading", "serving"])
def test_nothing_outlives_worker_0_killed_in_any_state(tmp_path: Path, moment: str) -> None:
    """Worker 0 supervises; once it is killed (SIGKILL: it cannot tell anyone), every process
    it started stops within seconds, whether they were starting, loading their models, or
    serving; none keeps listening on the ports alone."""
    (tmp_path / "pid" / "1").mkdir(parents=True)
    (tmp_path / "pid" / "config.pbtxt").write_text(pid_config("pid").replace("in_process", "process"))
    (tmp_path / "pid" / "1" / "model.py").write_text(PID_MODEL)
    if moment == "loading":
        (tmp_path / "slow" / "1").mkdir(parents=True)
        (tmp_path / "slow" / "config.pbtxt").write_text(pid_config("slow").replace("in_process", "process"))
        (tmp_path / "slow" / "1" / "model.py").write_text(SLOW_MODEL)
    server = ServerProcess(tmp_path, "--workers", "3")
    server.start(expect_ready=moment == "serving")
    try:
        assert server.process is not None
        if moment == "loading":
            assert _wait_for(lambda: "loading: slow:1" in server.log(), 30)
            time.sleep(0.5)  # the slow model's process is in its initialize
        elif moment == "starting":  # the moment worker 0 has started the others
            assert _wait_for(lambda: len(psutil.Process(server.process.pid).children()) >= 2, 30)
        family = [p.pid for p in psutil.Process(server.process.pid).children(recursive=True)]
        assert family
        server.process.kill()
        server.process.wait()
        assert _wait_for(lambda: not any(process_alive(pid) for pid in family), 5), [
            (pid, process_title(pid)) for pid in family if process_alive(pid)
        ]
    finally:
        server.__exit__()


def process_title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
