"""The fork server: a copy of worker 0 from before it started serving, kept to start a worker
again in milliseconds.

Worker 0 forks the model home and the first workers before it starts a thread, so they begin
with every module it imported. A worker that dies later cannot be forked from worker 0 again:
worker 0 has threads by then, and a fork keeps only the thread that forks (a lock another
thread held would stay locked in the child). A new interpreter takes seconds on a busy machine
to import what a worker imports (2.7-4.0 s measured under load), and the front doors answer 503
while the model home is away. So worker 0 forks this process first of all, while it has one
thread; it waits, with that one thread, for worker 0 to ask for a worker, and forks one.

The new worker must be worker 0's child like the others: worker 0 waits for its exit status
and the worker ends when worker 0 ends (linux_process.end_with_parent). So the fork server
forks twice: the first child forks the worker and exits, the kernel hands the worker to worker
0, which declared itself a subreaper (PR_SET_CHILD_SUBREAPER) for that, and the worker runs
once it sees worker 0 as its parent. Processes orphaned under worker 0 later (a dead model
home's model processes) come to worker 0 too, which reaps them (`reap_adopted`).

The fork server ends with worker 0 (PR_SET_PDEATHSIG, SIGKILL: it holds nothing to clean up),
or when worker 0 closes its socket. Where any of this is missing (no prctl, the fork server
died), a worker starts as a new interpreter, as before.

Messages, one per record of a SOCK_SEQPACKET socketpair:
    worker 0 -> fork server: JSON ``{"argv": [...], "env": {...}, "own_group": bool}`` with one
    descriptor, the write end of the worker's ready pipe.
    first child -> worker 0: the new worker's pid, 8 bytes little-endian (0: the fork failed).
"""

from __future__ import annotations

import array
import contextlib
import json
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import NoReturn

from .linux_process import end_with_parent, make_subreaper, name_process

__all__ = ["ForkServer", "run_forked", "reap_adopted", "Main"]

log = logging.getLogger("naiad")

# A process's main program from its command-line arguments (naiad.cli.main); its exit status.
Main = Callable[[list[str]], int]

FORK_SERVER_NAME = "naiad-forker"
_PID = struct.Struct("<q")
_MAX_REQUEST_BYTES = 256 * 1024  # a request carries the worker's command line and role
# Environment variable naming the ready pipe's write end in the worker (supervisor.py's).
_READY_FD_ENV = "NAIAD_WORKER_READY_FD"
# How long worker 0 waits for a pid, and a new worker for worker 0 to adopt it: both take
# microseconds; past these, something is wrong and a new interpreter is the way.
_REPLY_TIMEOUT_S = 10.0
_ADOPTION_TIMEOUT_S = 5.0


def run_forked(main: Main, argv: list[str], env: dict[str, str], own_group: bool) -> NoReturn:
    """In a freshly forked child: take `env`, run `main(argv)` to its end and exit with its
    status. Never returns."""
    code = 1
    try:
        # `main` installs this process's own log handler: the one inherited would log twice.
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        os.environ.update(env)
        if own_group:
            os.setpgid(0, 0)
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class ForkServer:
    """Worker 0's end of its fork server."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self._sock = sock
        self._lock = threading.Lock()  # one request and its answer at a time

    @classmethod
    def start(cls, main: Main) -> ForkServer | None:
        """Fork the fork server; None where worker 0 cannot adopt what it forks. Call it while
        this process has one thread."""
        if threading.active_count() != 1 or not make_subreaper():
            return None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            ours.close()
            _serve(theirs, main, parent)
        theirs.close()
        ours.settimeout(_REPLY_TIMEOUT_S)
        return cls(pid, ours)

    def fork(self, argv: list[str], env: dict[str, str], own_group: bool, ready_write: int) -> int | None:
        """A new worker running `main(argv)` with `env`, a child of this process: its pid, or
        None when the fork server could not make one (it is gone: start a new interpreter).
        Blocks for the fork (milliseconds): call it from a thread."""
        request = json.dumps({"argv": argv, "env": env, "own_group": own_group}).encode()
        with self._lock:
            try:
                self._sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [ready_write]))])
                reply = self._sock.recv(_PID.size)
            except OSError as exc:
                log.warning(
                    "the fork server (pid %d) did not answer (%s); workers start as new interpreters", self.pid, exc
                )
                self.close()
                return None
        if len(reply) != _PID.size:
            self.close()
            return None
        pid: int = _PID.unpack(reply)[0]
        return pid or None

    def close(self) -> None:
        """The fork server ends once its socket closes."""
        self._sock.close()


def _serve(sock: socket.socket, main: Main, parent: int) -> NoReturn:
    """The fork server's life: fork a worker for each request until worker 0 goes."""
    code = 0
    try:
        name_process(FORK_SERVER_NAME)
        end_with_parent(parent, signal.SIGKILL)
        # Ctrl-C reaches the whole foreground group: it is for worker 0. The workers get
        # worker 0's handling of it back.
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
        can_fork = _warm_up()
        while True:
            data, ancillary, _, _ = sock.recvmsg(_MAX_REQUEST_BYTES, socket.CMSG_SPACE(array.array("i").itemsize))
            fds = _received_fds(ancillary)
            if not data:
                break
            try:
                request = json.loads(data)
                if len(fds) == 1 and can_fork:
                    _fork_worker(sock, main, parent, request, fds[0], interrupt)
                else:
                    sock.send(_PID.pack(0))
            finally:
                for fd in fds:
                    os.close(fd)
    except BaseException:  # noqa: BLE001 - end here, whatever happened
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _warm_up() -> bool:
    """Import what a model home imports at start beyond what worker 0 had (the backends'
    plugins and their modules, found through their entry points: 0.5 s measured), once for
    every restart; whether forking is still safe after (one thread)."""
    from ..models.backend_registry import BackendRegistry

    try:
        BackendRegistry()
    except Exception as exc:  # noqa: BLE001 - the home reports a broken plugin itself
        log.debug("the fork server could not load the backends' plugins: %s", exc)
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return threading.active_count() == 1


def _fork_worker(
    sock: socket.socket, main: Main, parent: int, request: dict, ready_write: int, interrupt: object
) -> None:
    """Fork the first child, which forks the worker, answers its pid and exits."""
    try:
        first = os.fork()
    except OSError:
        sock.send(_PID.pack(0))
        return
    if first:
        os.waitpid(first, 0)
        return
    try:
        worker = os.fork()
    except OSError:
        worker = -1
    if worker:
        with contextlib.suppress(OSError):
            sock.send(_PID.pack(max(worker, 0)))
        os._exit(0)
    try:
        sock.close()
        deadline = time.monotonic() + _ADOPTION_TIMEOUT_S
        while os.getppid() != parent:  # the first child is exiting; worker 0 adopts us
            if time.monotonic() > deadline:
                os._exit(1)
            time.sleep(0.0005)
        signal.signal(signal.SIGINT, interrupt)  # type: ignore[arg-type]
        os.set_inheritable(ready_write, True)
        env = {**request["env"], _READY_FD_ENV: str(ready_write)}
        run_forked(main, [str(part) for part in request["argv"]], env, bool(request["own_group"]))
    finally:
        os._exit(1)  # run_forked exits itself; this is for a failure before it


def _received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return list(fds)


def reap_adopted(known: Iterable[int]) -> int:
    """Reap the children of this process that have ended and are not in `known` (processes
    orphaned under worker 0, the subreaper); how many. The ones in `known` are the pool's,
    which waits for them itself."""
    me = os.getpid()
    skip = set(known)
    reaped = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After the name: state, then the parent's pid.
        if len(fields) > 1 and fields[0] == b"Z" and int(fields[1]) == me:
            try:
                if os.waitpid(int(entry), os.WNOHANG)[0]:
                    reaped += 1
            except ChildProcessError:
                pass
    return reaped
