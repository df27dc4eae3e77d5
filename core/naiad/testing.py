"""Run `naiad serve` as a real process on loopback ports, for tests and benchmarks.

    with ServerProcess(repo, "--model-control-mode", "explicit") as server:
        client = tritonclient.http.InferenceServerClient(server.http_url)

A backend's unit tests drive its `Model` without a server: `naiad.config.validate_config(
naiad.config.parse_config_text(text, name), name)` gives the `ModelConfig` a load would,
and `expand_instance_groups(config, gpus=[])` the `InstanceContext`s it would create;
`gpu_ids()` is the GPUs a server started here would use (what a loaded config's instance
groups depend on).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .cli import READY_LINE
from .devices import gpu_ids
from .local_ports import PORT_TAKEN, free_port
from .models.instance_groups import expand_instance_groups
from .workers.linux_process import HOME_NAME, process_name, worker_name

__all__ = ["ServerProcess", "expand_instance_groups", "free_port", "gpu_ids"]


# How often start() tries fresh ports when one it picked was taken before the server bound it.
_PORT_ATTEMPTS = 3


class ServerProcess:
    """`naiad serve` on 127.0.0.1 with free HTTP, gRPC and metrics ports.

    `workers` is `--workers`; 1 unless asked (the flags may also pass `--workers`), None for
    naiad's own default (one per core): most tests check what one server process does with
    requests that meet in it (batches, rate limits, a cache), and a worker per core would
    double every test server's start-up on a two-core machine. `own_process_group` starts it
    as the leader of a process group of its own, which `signal_group` signals as Ctrl-C or
    systemd's stop signal every process of a service."""

    def __init__(
        self,
        *repositories_and_flags: str | Path,
        env: dict[str, str] | None = None,
        timeout: float = 120.0,
        workers: int | None = 1,
        own_process_group: bool = False,
    ) -> None:
        args: list[str] = []
        for item in repositories_and_flags:
            if isinstance(item, Path):
                args += ["--model-repository", str(item)]
            else:
                args.append(item)
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.args = [
            sys.executable,
            "-m",
            "naiad.cli",
            "serve",
            "--http-address",
            "127.0.0.1",
            "--grpc-address",
            "127.0.0.1",
            "--metrics-address",
            "127.0.0.1",
            "--http-port",
            str(self.http_port),
            "--grpc-port",
            str(self.grpc_port),
            "--metrics-port",
            str(self.metrics_port),
            *([] if workers is None else ["--workers", str(workers)]),
            *args,
        ]
        self.env = {**os.environ, **(env or {})}
        self.timeout = timeout
        self.own_process_group = own_process_group
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="naiad-", suffix=".log", delete=False)

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def start(self, expect_ready: bool = True) -> ServerProcess:
        for attempt in range(_PORT_ATTEMPTS):
            self.process = subprocess.Popen(
                self.args,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=self.own_process_group,
            )
            if not expect_ready or self._wait_ready():
                return self
            if attempt + 1 == _PORT_ATTEMPTS or PORT_TAKEN not in self.log().lower():
                break
            # A free port can be taken by another process between free_port() and the
            # server's bind: start again on fresh ones.
            self._take_new_ports()
            Path(self._log.name).write_text("")
        raise RuntimeError(f"naiad exited with {self.process.returncode}:\n{self.log()}")

    def _wait_ready(self) -> bool:
        """True once the server is ready, False when it exited first."""
        assert self.process is not None
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if READY_LINE in self.log():
                return True
            if self.process.poll() is not None:
                return False
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"naiad was not ready after {self.timeout}s:\n{self.log()}")

    def _take_new_ports(self) -> None:
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        for flag, port in (
            ("--http-port", self.http_port),
            ("--grpc-port", self.grpc_port),
            ("--metrics-port", self.metrics_port),
        ):
            self.args[self.args.index(flag) + 1] = str(port)

    def worker_pids(self) -> list[int]:
        """The process ids of the workers (the model home among them), worker 0 first; one
        process without workers is its own worker 0."""
        assert self.process is not None
        return [self.process.pid, *sorted(_roles_of_children(self.process.pid))]

    def front_door_pids(self) -> list[int]:
        """The workers without models (worker 0 first)."""
        home = self.model_home_pid()
        return [pid for pid in self.worker_pids() if pid != home]

    def model_home_pid(self) -> int | None:
        """The process id of the model home (the worker where the models live), or None for
        one process, whose models live in it."""
        assert self.process is not None
        homes = [pid for pid, role in _roles_of_children(self.process.pid).items() if role == "home"]
        return homes[0] if homes else None

    def signal_group(self, sig: int) -> None:
        """Send `sig` to every process of the server's group (see `own_process_group`)."""
        assert self.process is not None and self.own_process_group
        os.killpg(self.process.pid, sig)

    def wait(self, timeout: float = 60.0) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def __enter__(self) -> ServerProcess:
        # `with ServerProcess(...)` starts it; `with process.start()` must not start another.
        if self.process is not None and self.process.poll() is None:
            return self
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass


def _roles_of_children(pid: int) -> dict[int, str]:
    """The role of each process `pid` started for `naiad serve --workers N` ("home" or
    "worker"), told by the name it gives itself (its children of other kinds, such as model
    processes, left out)."""
    roles: dict[int, str] = {}
    for child in _children(pid):
        name = process_name(child)
        if name == HOME_NAME:
            roles[child] = "home"
        elif name.startswith(worker_name(0)[:-1]):
            roles[child] = "worker"
    return roles


def _children(pid: int) -> list[int]:
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for tid in threads:
        try:
            children += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return children
