"""`naiad serve --workers N`: N server processes sharing the HTTP and gRPC ports.

Python serves one request at a time per interpreter, so on a machine with several cores one
process leaves cores idle. With `--workers N` the process started by the user (worker 0)
starts N-1 copies of itself with the same flags; every process loads every model and listens
on the same HTTP and gRPC ports with SO_REUSEPORT, and the kernel spreads new connections
over them. What that means for coherence (docs/performance.md says it for users):

- readiness: worker 0 logs the ready line only once every worker serves; a process answers
  /v2/health/ready from its own state, and a worker listens only after its models loaded;
- metrics: only worker 0 serves the metrics port, with worker 0's own counters;
- model management: explicit model control is refused (a load or unload would reach one
  process only); in poll mode each process follows the repository on its own;
- system/CUDA shared-memory registrations live in the process that received them, so clients
  that register regions must use one worker.

If a worker exits, worker 0 shuts the whole server down rather than serving at reduced size
unnoticed; on SIGTERM it stops the workers and waits for them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from typing import Sequence

__all__ = ["WorkerPool", "WORKER_READY_FD_ENV", "WORKER_INDEX_ENV", "worker_arguments", "signal_worker_ready",
           "is_worker", "wait_orphaned"]

log = logging.getLogger("naiad")

WORKER_INDEX_ENV = "NAIAD_WORKER_INDEX"
# The write end of a pipe through which a worker tells worker 0 it serves.
WORKER_READY_FD_ENV = "NAIAD_WORKER_READY_FD"


def worker_arguments(argv: Sequence[str]) -> list[str]:
    """The command-line of an extra worker: the user's flags, then overrides (argparse keeps
    the last occurrence): one process, shared ports, no metrics port."""
    return [*argv, "--workers", "1", "--reuse-http-port", "true", "--reuse-grpc-port", "true",
            "--allow-metrics", "false"]


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


class WorkerPool:
    """The extra worker processes of one `naiad serve --workers N`."""

    def __init__(self, argv: Sequence[str], count: int) -> None:
        self._argv = worker_arguments(argv)
        self._count = count
        self._processes: list[subprocess.Popen[bytes]] = []
        self._ready_read = -1

    def start(self) -> None:
        read_end, write_end = os.pipe()
        self._ready_read = read_end
        try:
            for index in range(1, self._count + 1):
                env = dict(os.environ, **{WORKER_INDEX_ENV: str(index), WORKER_READY_FD_ENV: str(write_end)})
                self._processes.append(subprocess.Popen(
                    [sys.executable, "-m", "naiad.cli", *self._argv], env=env, pass_fds=(write_end,)))
        finally:
            os.close(write_end)
        log.info("started %d extra worker process(es): %s", self._count,
                 ", ".join(str(p.pid) for p in self._processes))

    async def wait_ready(self) -> None:
        """Returns once every worker serves; raises RuntimeError if one exits first."""
        loop = asyncio.get_running_loop()
        ready = 0
        while ready < self._count:
            chunk = await loop.run_in_executor(None, os.read, self._ready_read, 64)
            if not chunk:  # every write end closed: a worker exited before it served
                break
            ready += len(chunk)
        os.close(self._ready_read)
        if ready < self._count:
            raise RuntimeError(f"{self._count - ready} worker process(es) exited before serving: {self._exits()}")

    async def wait_exit(self) -> str:
        """Returns (a description) when any worker exits."""
        while True:
            if any(p.poll() is not None for p in self._processes):
                return self._exits()
            await asyncio.sleep(0.5)

    def _exits(self) -> str:
        return ", ".join(f"pid {p.pid} exit {p.returncode}" for p in self._processes if p.poll() is not None)

    async def stop(self, timeout_s: float) -> None:
        """SIGTERM to every worker (each drains its own requests), then SIGKILL after timeout_s."""
        for process in self._processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s + 5
        for process in self._processes:
            while process.poll() is None and loop.time() < deadline:
                await asyncio.sleep(0.05)
            if process.poll() is None:
                log.warning("worker process %d did not stop in time; killing it", process.pid)
                process.kill()
                process.wait()
