"""`naiad serve --workers N`: N front doors sharing the HTTP and gRPC ports, one model home.

Python serves one request at a time per interpreter, so on a machine with several cores one
process leaves cores idle. The process started by the user (worker 0) starts the model home
(model_home.py: where every model lives, once) and N-1 copies of itself with the same flags;
each worker listens on the same HTTP and gRPC ports with SO_REUSEPORT, the kernel spreads new
connections over them, and each hands its requests to the model home (front_door.py).
docs/deployment.md says what that means for users.

Worker 0 supervises: it logs the ready line once the model home and every worker serve,
starts one that died again (the new one replays worker 0's journal before it serves), and on
SIGTERM stops the workers, waits for them, and stops the model home last. A process whose
parent is gone (worker 0 killed with SIGKILL) stops by itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from .fork_server import ForkServer, Main, reap_adopted, run_forked
from .topology import WORKER_INDEX_ENV, Topology

__all__ = [
    "WorkerPool",
    "WORKER_READY_FD_ENV",
    "WORKER_PARENT_ENV",
    "WORKER_INDEX_ENV",
    "worker_arguments",
    "signal_worker_ready",
    "is_worker",
    "wait_orphaned",
]

log = logging.getLogger("naiad")

# The write end of a pipe through which a worker tells worker 0 it serves.
WORKER_READY_FD_ENV = "NAIAD_WORKER_READY_FD"
# Worker 0's process id, in every process it starts: theirs to outlive never.
WORKER_PARENT_ENV = "NAIAD_WORKER_PARENT"
# A worker started again that dies before it serves is started again after this delay,
# doubled each time up to _MAX_BACKOFF_S (a model that crashes at load must not spin).
_FIRST_BACKOFF_S = 1.0
_MAX_BACKOFF_S = 30.0
# After a process of the pool died, its own children come to worker 0 (the subreaper) as they
# end: reaped this many seconds after the death.
_REAP_AFTER_S = (0.5, 2.0, 10.0, 60.0)


def worker_arguments(argv: Sequence[str], home: bool = False) -> list[str]:
    """The command-line of an extra worker: the user's flags, then overrides (argparse keeps
    the last occurrence): one process, shared ports (the OpenAI port too). The metrics port
    is the model home's: the figures are its models'."""
    return [
        *argv,
        "--workers",
        "1",
        "--reuse-http-port",
        "true",
        "--reuse-grpc-port",
        "true",
        *([] if home else ["--allow-metrics", "false"]),
    ]


def is_worker() -> bool:
    """Whether this process is an extra worker started by a WorkerPool."""
    return bool(os.environ.get(WORKER_READY_FD_ENV))


def worker_0() -> int:
    """In a process worker 0 started: worker 0's process id."""
    return int(os.environ[WORKER_PARENT_ENV])


async def wait_orphaned() -> None:
    """In a worker: returns when worker 0 is gone (even killed with SIGKILL, which it cannot
    forward), so that no worker keeps serving on the shared ports by itself. The kernel's
    SIGTERM (linux_process.end_with_parent) comes first where there is prctl."""
    parent = worker_0()
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


class _Forked:
    """A process forked from worker 0, with what the pool uses of a `subprocess.Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Worker:
    """One process of the pool (an extra worker, or the model home) and the pipe it signals
    readiness through. With `fork`, it is forked from this process and runs `fork(argv)`:
    it shares the modules already imported, copy-on-write, which a fresh interpreter would
    load again (tens of MB per process); with `forker` (a worker started again), the fork
    server forks it the same way; without either, it is a new interpreter."""

    def __init__(
        self,
        argv: list[str],
        topology: Topology,
        index: int,
        restarted: bool,
        fork: Main | None,
        forker: ForkServer | None = None,
    ) -> None:
        self.index = index
        home = index == topology.home_index
        self.label = "the model home" if home else f"worker {index}"
        read_end, write_end = os.pipe()
        self.ready_read = read_end
        role = topology.environment_of(index, restarted, home=home)
        env = {**role, WORKER_READY_FD_ENV: str(write_end), WORKER_PARENT_ENV: str(os.getpid())}
        try:
            forked = forker.fork(argv, env, home, write_end) if forker is not None and fork is None else None
            if fork is not None:
                self.process: _Forked | subprocess.Popen[bytes] = _fork(fork, argv, env, home, read_end)
            elif forked is not None:
                self.process = _Forked(forked)
            else:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "naiad.cli", *argv],
                    env=dict(os.environ, **env),
                    pass_fds=(write_end,),
                    # The model home stops last, after the workers have finished their requests:
                    # a Ctrl-C in a terminal, sent to the whole foreground group, must not reach it.
                    process_group=0 if home else None,
                )
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
        """Its exit status, the moment it ends (a pidfd turns readable then)."""
        try:
            pidfd: int | None = os.pidfd_open(self.process.pid)
        except OSError:
            pidfd = None  # ended and reaped already, or no pidfd here: poll
        loop = asyncio.get_running_loop()
        try:
            while (code := self.process.poll()) is None:
                if pidfd is None:
                    await asyncio.sleep(0.2)
                    continue
                ended = loop.create_future()
                loop.add_reader(pidfd, lambda f=ended: f.done() or f.set_result(None))
                try:
                    await ended
                finally:
                    loop.remove_reader(pidfd)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        return code


def _fork(main: Main, argv: list[str], env: dict[str, str], own_group: bool, ready_read: int) -> _Forked:
    """Fork; the child takes `env` and runs `main(argv)` to its end."""
    pid = os.fork()
    if pid:
        return _Forked(pid)
    os.close(ready_read)
    run_forked(main, argv, env, own_group)


class WorkerPool:
    """The model home and the extra workers of one `naiad serve --workers N`, supervised by
    worker 0."""

    def __init__(self, argv: Sequence[str], topology: Topology) -> None:
        self._home_argv = worker_arguments(argv, home=True)
        self._worker_argv = worker_arguments(argv)
        self._topology = topology
        self._workers: dict[int, _Worker] = {}
        self._ready: dict[int, asyncio.Task[bool]] = {}
        self._forker: ForkServer | None = None
        self._stopping = False
        self._reaping: set[asyncio.Task[None]] = set()

    def _start(self, index: int, restarted: bool, fork: Main | None = None) -> _Worker:
        argv = self._home_argv if index == self._topology.home_index else self._worker_argv
        worker = self._workers[index] = _Worker(argv, self._topology, index, restarted, fork, self._forker)
        return worker

    def start(self, main: Main) -> None:
        """Start the model home and the extra workers, all at once (the workers connect to
        the model home once its models are loaded), forked from this process running `main`.
        Call it before this process starts threads or an event loop: a fork keeps only the
        thread that forks. A process started again later comes from the fork server, forked
        first (or is a new interpreter where there is none)."""
        fork: Main | None = main if threading.active_count() == 1 else None
        if fork is not None:
            self._forker = ForkServer.start(main)
        for index in range(1, self._topology.count):
            self._start(index, restarted=False, fork=fork)
        log.info(
            "started %d more worker process(es), worker %d the model home: %s",
            len(self._workers),
            self._topology.home_index,
            ", ".join(str(w.process.pid) for w in self._workers.values()),
        )

    async def wait_home(self) -> None:
        """Returns once the model home serves; raises RuntimeError if it exits first."""
        await self._wait_ready([self._topology.home_index])

    async def wait_ready(self) -> None:
        """Returns once every process serves; raises RuntimeError if one exits first."""
        await self._wait_ready(list(self._workers))

    async def _wait_ready(self, indices: list[int]) -> None:
        for index in indices:
            if index not in self._ready:
                self._ready[index] = asyncio.ensure_future(self._workers[index].wait_ready())
        ready = await asyncio.gather(*(self._ready[index] for index in indices))
        if not all(ready):
            exits = ", ".join(
                f"{w.label} (pid {w.process.pid}) exit {w.process.poll()}"
                for w, ok in zip((self._workers[i] for i in indices), ready)
                if not ok
            )
            raise RuntimeError(f"process(es) exited before serving: {exits}")

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
            log.error("%s (pid %d) exited with %s; starting it again", worker.label, worker.process.pid, code)
            self._reap_orphans_later()
            worker = await asyncio.get_running_loop().run_in_executor(None, self._start, index, True)
            if await worker.wait_ready():
                log.info("%s serves again (pid %d)", worker.label, worker.process.pid)
                backoff = _FIRST_BACKOFF_S
            else:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)

    def _reap_orphans_later(self) -> None:
        """The processes the dead one started (its model processes) end on their own, and
        come to worker 0, the subreaper, to be reaped."""

        async def reap() -> None:
            for delay in _REAP_AFTER_S:
                await asyncio.sleep(delay)
                reap_adopted(w.process.pid for w in self._workers.values())

        task = asyncio.ensure_future(reap())
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    def stop_front_doors(self) -> None:
        """SIGTERM to every worker but the model home: each stops listening and drains its
        connections, while the model home still runs their requests."""
        self._stopping = True
        for index, worker in self._workers.items():
            if index != self._topology.home_index and worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)

    async def stop(self, timeout_s: float) -> None:
        """Stop the front doors (each drains its own requests) and wait for them, then the
        model home, which runs them meanwhile; SIGKILL to any still running after timeout_s."""
        self._stopping = True
        for task in [*self._ready.values(), *self._reaping]:
            task.cancel()
        if self._forker is not None:
            self._forker.close()
        home = self._topology.home_index
        await self._stop_processes([w for i, w in self._workers.items() if i != home], timeout_s)
        await self._stop_processes([self._workers[home]] if home in self._workers else [], timeout_s)

    @staticmethod
    async def _stop_processes(workers: list[_Worker], timeout_s: float) -> None:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s + 5
        for worker in workers:
            process = worker.process
            while process.poll() is None and loop.time() < deadline:
                await asyncio.sleep(0.05)
            if process.poll() is None:
                log.warning("%s (pid %d) did not stop in time; killing it", worker.label, process.pid)
                process.kill()
                process.wait()
