"""Model processes forked from the stub template (the default, `stub-start=fork`): they serve
through tritonclient like spawned ones, they are the template's children, crashes, kills and
timeouts still restart them, a dead template is replaced, a killed server leaves nothing
behind, and a model with another interpreter is still spawned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from naiad_backend_python.server_side.forked_process import EXIT_STATUS_UNKNOWN, ForkedProcess
from python_backend_servers import process_alive
from tritonclient.utils import InferenceServerException

from naiad import ServerOptions
from naiad.testing import ServerProcess

# Answers with its pid, its parent's pid and what a model could notice of how its process
# started; "hang" sleeps past the model's execute timeout.
PROBE_MODEL = """
import json
import os
import signal
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def disposition(sig):
    # A handler by name: its address differs between processes.
    handler = signal.getsignal(sig)
    return getattr(handler, "__qualname__", repr(handler))


def probe():
    return json.dumps({
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "sigint": disposition(signal.SIGINT),
        "sigterm": disposition(signal.SIGTERM),
        "sigchld": disposition(signal.SIGCHLD),
        "fds": len(os.listdir("/proc/self/fd")),
        "marker": os.environ.get("NAIAD_FORK_TEST_MARKER"),
        "random": float(np.random.random()),
    })


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            if pb_utils.get_input_tensor_by_name(request, "ACTION").as_numpy()[0] == b"hang":
                time.sleep(3600)
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("PIDS", np.array([os.getpid(), os.getppid()], dtype=np.int64)),
                pb_utils.Tensor("PROBE", np.array([probe().encode()], dtype=object)),
            ]))
        return responses
"""

PROBE_CONFIG = """
name: "{name}"
backend: "python"
input [ {{ name: "ACTION" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "PIDS" data_type: TYPE_INT64 dims: [ 2 ] }}, {{ name: "PROBE" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters {{ key: "execute_timeout_seconds" value: {{ string_value: "2" }} }}
{extra}
"""

MARKER = {"NAIAD_FORK_TEST_MARKER": "from the server's environment"}
# Every wait below ends by then at the latest.
DEADLINE_S = 60.0


def add_probe(repo: Path, name: str, extra: str = "") -> Path:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(PROBE_MODEL)
    (repo / name / "config.pbtxt").write_text(PROBE_CONFIG.format(name=name, extra=extra))
    return repo / name


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fork_repo")
    add_probe(root, "probe")
    return root


@pytest.fixture(scope="module")
def forked(repo: Path) -> Iterator[ServerProcess]:
    with ServerProcess(repo, env=MARKER) as server:
        yield server


def probe(url: str, model: str = "probe", action: bytes = b"probe") -> tuple[int, int, dict[str, Any]]:
    """(the model process's pid, its parent's pid, what it saw), through tritonclient."""
    client = httpclient.InferenceServerClient(url, network_timeout=30)
    try:
        action_input = httpclient.InferInput("ACTION", [1], "BYTES")
        action_input.set_data_from_numpy(np.array([action], dtype=object))
        result = client.infer(model, [action_input])
    finally:
        client.close()
    pid, parent = (int(v) for v in result.as_numpy("PIDS"))
    return pid, parent, json.loads(result.as_numpy("PROBE")[0])


def probe_until(url: str, accept: Callable[[int], bool], model: str = "probe") -> tuple[int, int, dict[str, Any]]:
    """Probe until a process `accept`s its pid (a restarted one), within DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            answer = probe(url, model)
            if accept(answer[0]):
                return answer
        except InferenceServerException:
            pass  # the failed request of the killed process, or the restart under way
        if time.monotonic() > deadline:
            pytest.fail(f"no new model process served within {DEADLINE_S:g} s")
        time.sleep(0.1)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def wait_for(predicate: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def is_template(pid: int) -> bool:
    return b"model_side.stub_template" in Path(f"/proc/{pid}/cmdline").read_bytes()


def test_a_forked_stub_serves_and_sees_what_a_spawned_one_sees(repo: Path, forked: ServerProcess) -> None:
    pid, template, seen = probe(forked.http_url)
    assert forked.process is not None
    # The model's process is the template's child; the template is the server's.
    assert template != forked.process.pid and is_template(template)
    assert parent_of(template) == forked.process.pid
    # It forks from one thread only.
    assert len(os.listdir(f"/proc/{template}/task")) == 1
    with ServerProcess(repo, "--backend-config", "python,stub-start=spawn", env=MARKER) as spawned:
        spawned_pid, spawned_parent, expected = probe(spawned.http_url)
        assert spawned.process is not None and spawned_parent == spawned.process.pid
    version_dir = str((repo / "probe" / "1").resolve())
    assert seen["cwd"] == seen["path0"] == version_dir and seen["argv"] == [""]
    assert seen["marker"] == MARKER["NAIAD_FORK_TEST_MARKER"]
    # The same signal dispositions and the same open descriptors (nothing of the template's
    # or of a sibling's leaks in): only the random draw differs.
    assert seen["random"] != expected["random"]
    seen.pop("random"), expected.pop("random")
    assert seen == expected


def test_two_forked_instances_draw_different_random_numbers(tmp_path: Path) -> None:
    # numpy's global random state must not be the template's copy in every process.
    add_probe(tmp_path, "one")
    add_probe(tmp_path, "two")
    with ServerProcess(tmp_path) as server:
        draws = {probe(server.http_url, name)[2]["random"] for name in ("one", "two")}
    assert len(draws) == 2


def test_a_killed_forked_stub_is_restarted_from_the_template(forked: ServerProcess) -> None:
    pid, template, _ = probe(forked.http_url)
    os.kill(pid, signal.SIGKILL)
    new_pid, new_parent, _ = probe_until(forked.http_url, lambda p: p != pid)
    assert new_parent == template and not process_alive(pid)
    # The template reported the exit status of its child to the server.
    assert "exited unexpectedly (killed by signal SIGKILL)" in forked.log()


def test_an_execute_timeout_kills_the_forked_stub(forked: ServerProcess) -> None:
    pid, template, _ = probe(forked.http_url)
    with pytest.raises(InferenceServerException) as caught:
        probe(forked.http_url, action=b"hang")
    assert "did not finish within 2 s" in str(caught.value) and "execute_timeout_seconds" in str(caught.value)
    assert wait_for(lambda: not process_alive(pid)), "the timed-out model process still runs"
    new_pid, new_parent, _ = probe_until(forked.http_url, lambda p: p != pid)
    assert new_parent == template


def test_a_dead_template_is_replaced_at_the_next_stub_start(repo: Path) -> None:
    with ServerProcess(repo) as server:
        assert server.process is not None
        pid, template, _ = probe(server.http_url)
        os.kill(template, signal.SIGKILL)
        assert wait_for(lambda: not process_alive(template))
        # What it forked does not depend on it.
        assert probe(server.http_url)[0] == pid
        os.kill(pid, signal.SIGKILL)
        new_pid, new_template, _ = probe_until(server.http_url, lambda p: p != pid)
        assert new_template != template and is_template(new_template)
        assert parent_of(new_template) == server.process.pid
        log = server.log()
        # Nobody could learn the orphan's exit status, and the log says so.
        assert "exit status unknown: the stub template that forked it did not report it" in log
        assert f"the stub template (pid {template}) has ended (killed by signal SIGKILL); starting a new one" in log


def test_a_server_killed_with_sigkill_leaves_no_template_or_stub(repo: Path) -> None:
    server = ServerProcess(repo).start()
    try:
        pid, template, _ = probe(server.http_url)
        assert process_alive(pid) and process_alive(template)
    finally:
        assert server.process is not None
        server.process.kill()
        server.process.wait()
        server.__exit__()
    assert wait_for(lambda: not process_alive(template)), f"stub template {template} outlived its server"
    assert wait_for(lambda: not process_alive(pid)), f"model process {pid} outlived its server"


def base_interpreter() -> str:
    """The interpreter our venv was made from, whose site-packages hold numpy."""
    return getattr(sys, "_base_executable", sys.executable)


def test_a_model_with_another_interpreter_is_spawned(tmp_path: Path) -> None:
    if subprocess.run([base_interpreter(), "-c", "import numpy"], capture_output=True).returncode != 0:
        pytest.skip("the base interpreter has no numpy to share with the test venv")
    add_probe(tmp_path, "probe")
    model = add_probe(
        tmp_path,
        "in_venv",
        'parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/venv" } }',
    )
    venv = model / "venv"
    subprocess.run([base_interpreter(), "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    with ServerProcess(tmp_path) as server:
        assert server.process is not None
        _, venv_parent, _ = probe(server.http_url, "in_venv")
        _, forked_parent, _ = probe(server.http_url, "probe")
    assert venv_parent == server.process.pid
    assert forked_parent != server.process.pid and forked_parent > 0


def test_an_unknown_stub_start_is_refused_with_its_name(tmp_path: Path) -> None:
    from python_backend_servers import ServerThread

    add_probe(tmp_path, "probe")
    options = ServerOptions(model_repositories=[str(tmp_path)], backend_config={"python": {"stub-start": "clone"}})
    server = ServerThread(options)
    try:
        [failure] = server.server.startup_failures
        assert "--backend-config python,stub-start: expected one of fork, spawn, got 'clone'" in failure
    finally:
        server.close()


def process_of(server: Any, model: str = "probe") -> Any:
    return server.server.model(model).runners[0].instance._connection.process


def test_a_template_that_cannot_start_means_a_spawned_stub(tmp_path: Path, monkeypatch, caplog) -> None:
    from naiad_backend_python.server_side import stub_forker
    from python_backend_servers import ServerThread

    monkeypatch.setattr(stub_forker, "_TEMPLATE_MODULE", "naiad_backend_python.no_such_template")
    add_probe(tmp_path, "probe")
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    try:
        assert server.server.startup_failures == []
        assert parent_of(process_of(server).pid) == os.getpid()  # spawned by this (server) process
        assert "cannot start the stub template" in caplog.text
    finally:
        server.close()


def test_a_stuck_template_costs_a_bounded_wait_and_a_spawned_stub(tmp_path: Path, monkeypatch, caplog) -> None:
    from naiad_backend_python.server_side import stub_forker
    from python_backend_servers import ServerThread

    add_probe(tmp_path, "probe")
    server = ServerThread(ServerOptions(model_repositories=[str(tmp_path)]))
    action = {"ACTION": np.array([b"probe"], dtype=object)}
    try:
        first_handle = process_of(server)
        first = first_handle.pid
        template = parent_of(first)
        assert is_template(template)
        # Short only from now on, so that a slow machine still forks the first process.
        monkeypatch.setattr(stub_forker, "FORK_REPLY_TIMEOUT_S", 1.0)
        os.kill(template, signal.SIGSTOP)  # alive, but it will never answer
        try:
            os.kill(first, signal.SIGKILL)
            started = time.monotonic()
            deadline = started + DEADLINE_S
            while True:
                try:
                    server.infer("probe", action)
                    if process_of(server).pid != first:
                        break
                except Exception:  # noqa: BLE001 - the killed process's request, or the restart
                    pass
                assert time.monotonic() < deadline, "the model never served again"
                time.sleep(0.1)
            replacement = process_of(server).pid
            assert parent_of(replacement) == os.getpid()
            assert "did not answer within 1 s" in caplog.text
            # A stuck template sent no exit status: waiting for it ended rather than hung.
            assert first_handle.returncode == EXIT_STATUS_UNKNOWN
            assert wait_for(lambda: not process_alive(template)), "the stuck template was not killed"
        finally:
            if process_alive(template):
                os.kill(template, signal.SIGKILL)
    finally:
        server.close()


# The handle on its own, on a process of this test's (as the template's children are the
# template's): the status comes from whoever reaps the process, the end from the pidfd.


def test_the_handle_answers_with_the_status_the_template_reports() -> None:
    process = subprocess.Popen(["sleep", "60"])
    handle = ForkedProcess(process.pid, os.pidfd_open(process.pid), "sleep")
    try:
        assert handle.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            handle.wait(0.05)
        handle.kill()
        handle.exited(process.wait())  # as the template reports it
        assert handle.wait() == handle.poll() == -signal.SIGKILL
        handle.kill()  # nothing to signal any more: a no-op, as Popen's
    finally:
        process.kill()
        process.wait()


def test_the_handle_gives_up_on_a_status_that_never_comes(monkeypatch) -> None:
    from naiad_backend_python.server_side import forked_process

    monkeypatch.setattr(forked_process, "STATUS_GRACE_S", 0.5)
    process = subprocess.Popen(["sleep", "60"])
    handle = ForkedProcess(process.pid, os.pidfd_open(process.pid), "sleep")
    try:
        handle.kill()
        process.wait()  # ended and reaped, and nobody reports it
        assert handle.poll() is None  # within the grace the status may still come
        started = time.monotonic()
        assert handle.wait(10) == EXIT_STATUS_UNKNOWN
        assert time.monotonic() - started < 5
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_an_orphaned_handle_needs_no_grace() -> None:
    process = subprocess.Popen(["sleep", "60"])
    handle = ForkedProcess(process.pid, os.pidfd_open(process.pid), "sleep")
    try:
        handle.orphaned()  # the template ended
        assert handle.poll() is None  # the process itself still runs
        handle.kill()
        process.wait()
        assert handle.wait(1) == EXIT_STATUS_UNKNOWN
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
