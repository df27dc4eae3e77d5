"""The server tune starts itself when it is given a model repository: `naiad serve` on free
127.0.0.1 ports in explicit model control mode (so tune decides what is loaded and with which
configuration), started again only when a candidate asks for another `--workers`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from naiad.local_ports import PORT_TAKEN, free_port

__all__ = ["LaunchError", "LaunchedServer", "ServerLauncher"]

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
# A free port can be taken (as the source port of some connection, say) between free_port()
# and the server's bind: the server is started again on fresh ports this many times in all.
PORT_ATTEMPTS = 3


class ReadyProbe(Protocol):
    def server_ready(self) -> bool: ...


class LaunchError(Exception):
    """The server did not start: the message ends with the last of its log."""


@dataclass(slots=True)
class LaunchedServer:
    process: subprocess.Popen[bytes]
    http_port: int
    grpc_port: int
    workers: int
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM to the server's process group (its workers and model processes with it),
        SIGKILL for what is left after the wait."""
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log_path.unlink(missing_ok=True)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(slots=True)
class ServerLauncher:
    repository: Path
    # Flags passed to every `naiad serve` it starts (after its own).
    extra_flags: Sequence[str]
    # A client of the server at an URL (HOST:PORT), asked whether it is ready.
    probe: Callable[[str], ReadyProbe]
    current: LaunchedServer | None = field(default=None)

    def ensure(self, workers: int) -> LaunchedServer:
        """A running server with `workers` front doors: the one already running when it has
        them, else a new one (the old one stopped first, so two never share the CPUs)."""
        if self.current is not None and self.current.workers == workers and self.current.process.poll() is None:
            return self.current
        self.stop()
        attempts_left = PORT_ATTEMPTS
        while True:
            try:
                self.current = self._start(workers)
                return self.current
            except LaunchError as exc:
                attempts_left -= 1
                if attempts_left == 0 or PORT_TAKEN not in str(exc).lower():
                    raise

    def stop(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None

    def _start(self, workers: int) -> LaunchedServer:
        http, grpc, metrics = free_port(), free_port(), free_port()
        command = [
            sys.executable,
            "-m",
            "naiad.cli",
            "serve",
            "--model-repository",
            str(self.repository),
            "--model-control-mode",
            "explicit",
            "--http-address",
            "127.0.0.1",
            "--grpc-address",
            "127.0.0.1",
            "--metrics-address",
            "127.0.0.1",
            "--http-port",
            str(http),
            "--grpc-port",
            str(grpc),
            "--metrics-port",
            str(metrics),
            "--workers",
            str(workers),
            *self.extra_flags,
        ]
        log = tempfile.NamedTemporaryFile(prefix="naiad-tune-serve-", suffix=".log", delete=False)
        # Its own session: stopping it signals the whole group, and a Ctrl-C meant for tune
        # reaches tune alone, which then stops the server itself.
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()
        server = LaunchedServer(process, http, grpc, workers, Path(log.name))
        probe = self.probe(server.http_url)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = server.log_tail()
                server.stop()
                raise LaunchError(f"naiad serve exited with status {process.returncode}:\n{tail}")
            if probe.server_ready():
                return server
            time.sleep(0.1)
        tail = server.log_tail()
        server.stop()
        raise LaunchError(f"naiad serve was not ready after {READY_TIMEOUT_S:.0f} s:\n{tail}")
