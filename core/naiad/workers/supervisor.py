"""`naiad serve --workers N`: N server processes sharing the HTTP and gRPC ports.

Python serves one request at a time per interpreter, so on a machine with several cores one
process leaves cores idle. The process started by the user (worker 0) starts N-1 copies of
itself with the same flags; every process loads every model and listens on the same HTTP and
gRPC ports with SO_REUSEPORT, and the kernel spreads new connections over them. The control
plane (`control_plane.py`, `worker_server.py`) keeps them one server; docs/performance.md
says what that means for users.

Worker 0 supervises: it logs the ready line once every worker serves, starts a worker that
died again (the new one replays worker 0's journal before it serves), and on SIGTERM stops
the workers and waits for them. A worker whose parent is gone (worker 0 killed with SIGKILL)
stops by itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from .topology import WORKER_INDEX_ENV, Topology

__all__ = [
    "WorkerPool",
    "WORKER_READY_FD_ENV",
    "WORKER_INDEX_ENV",
    "worker_arguments",
    "signal_worker_ready",
    "is_worker",
    "wait_orphaned",
]

log = logging.getLogger("naiad")

# The write end of a pipe through which a worker tells worker 0 it serves.
WORKER_READY_FD_ENV = "NAIAD_WORKER_READY_FD"
# A worker started again that dies before it serves is started again after this delay,
# doubled each time up to _MAX_BACKOFF_S (a model that crashes at load must not spin).
_FIRST_BACKOFF_S = 1.0
_MAX_BACKOFF_S = 30.0


def worker_arguments(argv: Sequence[str]) -> list[str]:
    """The command-line of an extra worker: the user's flags, then overrides (argparse keeps
    the last occurrence): one process, shared ports (the OpenAI port too); the metrics port is
    worker 0's."""
    return [
        *argv,
        "--workers",
        "1",
        "--reuse-http-port",
        "true",
        "--reuse-grpc-port",
        "true",
        "--allow-metrics",
        "false",
    ]


def is_worker() -> bool:
    """Whether this process is an extra worker started by a WorkerPool."""
    return bool(os.environ.get(WORKER_READY_FD_ENV))


async def wait_orphaned() -> None:
    """In a worker: returns when worker 0 is gone (even killed with SIGKILL, which it cannot
    forward), so that no worker keeps serving on the shared ports by itself."""
    parent = os.getppid()
    while os.getppid() == parent:
        await asyncio.sleep(1.0)


def signal_worker_ready() -> bool:
    """In a worker started by a WorkerPool: tell worker 0 this process serves. False elsewhere."""
    fd = os.environ.get(WORKER_READY_FD_ENV)
    if not fd:
        return False
    try:
        os.write(int(fd), b"1")
        os.close(int(fd))
    except OSError:
        pass
    return True


class _Worker:
    """One extra worker process and the pipe it signals readiness through."""

    def __init__(self, argv: list[str], topology: Topology, index: int, restarted: bool) -> None:
        self.index = index
        read_end, write_end = os.pipe()
        self.ready_read = read_end
        env = dict(os.environ, **topology.environment_of(index, restarted), **{WORKER_READY_FD_ENV: str(write_end)})
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "naiad.cli", *argv], env=env, pass_fds=(write_end,))
        finally:
            os.close(write_end)

    async def wait_ready(self) -> bool:
        """True once it serves; False when it exited first."""
        loop = asyncio.get_running_loop()
        try:
            chunk = await loop.run_in_executor(None, os.read, self.ready_read, 1)
        finally:
            os.close(self.ready_read)
        return bool(chunk)  # b"": every write end closed, the worker exited before it served

    async def wait_exit(self) -> int:
        while self.process.poll() is None:
            await asyncio.sleep(0.2)
        return self.process.returncode


class WorkerPool:
    """The extra worker processes of one `naiad serve --workers N`, supervised by worker 0."""

    def __init__(self, argv: Sequence[str], topology: Topology) -> None:
        self._argv = worker_arguments(argv)
        self._topology = topology
        self._workers: dict[int, _Worker] = {}
        self._stopping = False

    def start(self) -> None:
        for index in range(1, self._topology.count):
            self._workers[index] = _Worker(self._argv, self._topology, index, restarted=False)
        log.info(
            "started %d extra worker process(es): %s",
            len(self._workers),
            ", ".join(str(w.process.pid) for w in self._workers.values()),
        )

    async def wait_ready(self) -> None:
        """Returns once every worker serves; raises RuntimeError if one exits first."""
        ready = await asyncio.gather(*(worker.wait_ready() for worker in self._workers.values()))
        if not all(ready):
            exits = ", ".join(
                f"worker {w.index} (pid {w.process.pid}) exit {w.process.poll()}"
                for w, ok in zip(self._workers.values(), ready)
                if not ok
            )
            raise RuntimeError(f"worker process(es) exited before serving: {exits}")

    async def supervise(self) -> None:
        """Start again every worker that exits, for as long as the server runs."""
        await asyncio.gather(*(self._keep(index) for index in list(self._workers)))

    async def _keep(self, index: int) -> None:
        backoff = _FIRST_BACKOFF_S
        while True:
            worker = self._workers[index]
            code = await worker.wait_exit()
            if self._stopping:
                return
            log.error("worker %d (pid %d) exited with %s; starting it again", index, worker.process.pid, code)
            worker = self._workers[index] = _Worker(self._argv, self._topology, index, restarted=True)
            if await worker.wait_ready():
                log.info("worker %d serves again (pid %d)", index, worker.process.pid)
                backoff = _FIRST_BACKOFF_S
            else:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def stop(self, timeout_s: float) -> None:
        """SIGTERM to every worker (each drains its own requests), then SIGKILL after timeout_s."""
        self._stopping = True
        processes = [worker.process for worker in self._workers.values()]
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s + 5
        for process in processes:
            while process.poll() is None and loop.time() < deadline:
                await asyncio.sleep(0.05)
            if process.poll() is None:
                log.warning("worker process %d did not stop in time; killing it", process.pid)
                process.kill()
                process.wait()
