"""The stub template: ``python -P -m naiad_backend_python.model_side.stub_template --socket-fd N``.

The server starts one per server process, with its own interpreter, the first time it starts a
model process (server_side/stub_forker.py). The template imports what every stub imports
(numpy, this package's model side, `naiad_wire.interprocess`, `triton_python_backend_utils`,
uvloop), freezes those objects out of the garbage collector's reach, and then forks one model process per
request. A forked stub shares those pages with the template and with its siblings until one of
them writes to a page (copy on write), so N Python models pay for the interpreter and numpy
about once instead of N times.

It keeps one thread: fork copies only the calling thread, so a lock that another thread held
at that moment would stay locked forever in the child. On that thread it does one thing at a
time: fork for a request, or reap a child that ended and tell the server its exit status
(the stub is the template's child, so only the template can learn it).

It ends when the server's end of its socket closes, which happens however the server ends,
SIGKILL included: the kernel closes a dead process's descriptors. (PR_SET_PDEATHSIG would not
do: it fires when the server *thread* that started the template exits, and that is whichever
loading thread came first.) The stubs it forked do not depend on it: each one watches its own
socket to the server, as a spawned stub does.

Standard library, numpy and this package only, as the stub.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import pkgutil
import select
import signal
import socket
import sys
import traceback
from typing import Any, NoReturn

from .fork_messages import receive_message, send_message

__all__ = ["main"]

# What a spawned stub imports before it runs model code; the template imports it once for all.
_PRELOAD = ("numpy", "triton_python_backend_utils", "naiad_backend_python.model_side.stub")
# Imported when present, as the stub's event loop does.
_PRELOAD_OPTIONAL = ("uvloop",)
_PACKAGES = ("naiad_backend_python.model_side", "naiad_wire.interprocess")
_THIS_MODULE = "naiad_backend_python.model_side.stub_template"


def main(argv: list[str] | None = None) -> int:
    # No collection while importing: a collection frees objects between the ones that stay,
    # leaving holes that later allocations (in each child) fill, copying the shared page.
    gc.disable()
    parser = argparse.ArgumentParser(prog="naiad_backend_python.model_side.stub_template")
    parser.add_argument("--socket-fd", type=int, required=True)
    args = parser.parse_args(argv)
    sock = socket.socket(fileno=args.socket_fd)
    # The dispositions this process started with are those a spawned stub starts with (the
    # server starts both the same way); each child gets them back.
    changed = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)}
    # Ctrl-C and a stop of the whole process group (systemd's, `kill -- -PGID`) are for the
    # server, which then closes our socket: the template must outlive its stubs to report
    # their exits. SIGCHLD must not be ignored (an ignored SIGCHLD reaps children unasked,
    # and the template needs their statuses).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    reason = _prepare()
    if reason:
        _send_or_leave(sock, {"op": "refused", "reason": reason})
        return 1
    gc.freeze()
    _send_or_leave(sock, {"op": "ready", "pid": os.getpid()})
    return Template(sock, {sig: h for sig, h in changed.items() if h is not None}).serve()


def _prepare() -> str:
    """Import what stubs share and make sure the process can fork safely; the reason when it
    cannot."""
    try:
        for name in _PRELOAD:
            importlib.import_module(name)
        for name in _PRELOAD_OPTIONAL:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        for package_name in _PACKAGES:
            package = importlib.import_module(package_name)
            for module in pkgutil.iter_modules(package.__path__, package_name + "."):
                if module.name != _THIS_MODULE:  # running as __main__ already
                    importlib.import_module(module.name)
    except Exception as exc:  # noqa: BLE001 - reported to the server, which spawns instead
        return f"cannot import what model processes use: {type(exc).__name__}: {exc}"
    _stop_blas_threads()
    threads = _thread_count()
    if threads != 1:
        return f"{threads} threads after importing numpy (forking needs one)"
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError) as exc:
        return f"no pidfd_open on this system ({exc})"
    return ""


def _stop_blas_threads() -> None:
    """OpenBLAS (numpy's wheels bundle it) starts its thread pool when it is loaded, that is at
    `import numpy`. `blas_thread_shutdown_` is what OpenBLAS's own fork handler calls: it
    joins the pool, which OpenBLAS starts again at the next product that wants threads (in a
    model process, its first large one), so models compute as in a spawned stub."""
    import ctypes

    for path in _loaded_libraries():
        if "blas" not in os.path.basename(path).lower():
            continue
        try:
            shutdown = ctypes.CDLL(path).blas_thread_shutdown_
        except (OSError, AttributeError):
            continue
        shutdown()


def _loaded_libraries() -> set[str]:
    try:
        with open("/proc/self/maps") as maps:
            return {line.split()[-1] for line in maps if ".so" in line and line.rstrip().split()[-1].startswith("/")}
    except OSError:
        return set()


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


class Template:
    """The fork loop: requests from the server, exits of the children."""

    def __init__(self, sock: socket.socket, child_signals: dict[int, Any]) -> None:
        self._sock = sock
        self._child_signals = child_signals
        self._children: dict[int, int] = {}  # pidfd -> pid
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    def serve(self) -> int:
        while True:
            for fd, _ in self._poll.poll():
                if fd == self._sock.fileno():
                    if not self._serve_request():
                        return 0
                else:
                    self._reap(fd)

    def _serve_request(self) -> bool:
        """False once the server has gone."""
        try:
            received = receive_message(self._sock)
        except ValueError:
            return True  # not JSON: nothing to answer
        except OSError:
            return False
        if received is None:
            return False
        message, fds = received
        try:
            reply, reply_fds = self._fork(message, fds)
        finally:
            for fd in fds:
                os.close(fd)
        return self._send(reply, reply_fds)

    def _fork(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], tuple[int, ...]]:
        flags = message.get("fd_flags", [])
        if message.get("op") != "fork" or len(flags) != len(fds):
            return {"op": "fork_failed", "error": f"a malformed request ({len(fds)} descriptors)"}, ()
        argv = [str(part) for flag, fd in zip(flags, fds) for part in (flag, fd)] + list(message.get("args", []))
        gc.freeze()  # what this loop allocated since, so the child's collector skips it too
        try:
            pid = os.fork()
        except OSError as exc:
            return {"op": "fork_failed", "error": f"fork: {exc}"}, ()
        if pid == 0:
            self._become_stub(argv, fds, message)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            # Without it the server could not signal the process safely: take it back.
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"op": "fork_failed", "error": f"pidfd_open: {exc}"}, ()
        self._children[pidfd] = pid
        self._poll.register(pidfd, select.POLLIN)
        return {"op": "forked", "pid": pid}, (pidfd,)

    def _reap(self, pidfd: int) -> None:
        pid = self._children.pop(pidfd)
        self._poll.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        self._send({"op": "exited", "pid": pid, "code": os.waitstatus_to_exitcode(status)})

    def _send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> bool:
        try:
            send_message(self._sock, message, fds)
        except OSError:
            return False
        return True

    def _become_stub(self, argv: list[str], fds: list[int], message: dict[str, Any]) -> NoReturn:
        """In the child: become the process `python -m ...model_side.stub ARGV` would be, and
        run the stub. Never returns to the template's loop."""
        code = 1
        try:
            for sig, handler in self._child_signals.items():
                signal.signal(sig, handler)
            # The socket object must not close its number later: the stub may reuse it.
            self._sock.detach()
            _close_descriptors_except({0, 1, 2, *fds})
            for fd in fds:
                os.set_inheritable(fd, True)  # as pass_fds leaves them in a spawned stub
            os.chdir(message["cwd"])
            os.environ.clear()
            os.environ.update(message["env"])
            # `python -m` puts the working directory first on sys.path (the template runs
            # with -P, so it has no such entry of its own).
            sys.path.insert(0, os.getcwd())
            _reseed_numpy()
            gc.enable()
            from .stub import main as stub_main

            code = stub_main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - whatever happens, never return into the loop
            traceback.print_exc()
        # stub_channel.leave, written out: this last step must not depend on an import.
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _close_descriptors_except(keep: set[int]) -> None:
    low = 0
    for high in [*sorted(keep), max(os.sysconf("SC_OPEN_MAX"), *keep) + 1]:
        # Only non-empty ranges: CPython hands closerange(n, n) to close_range(n, -1), which
        # closes everything from n up.
        if low < high:
            os.closerange(low, high)
        low = high + 1


def _reseed_numpy() -> None:
    """numpy's global random state was seeded once, in the template: without a new seed every
    model process would draw the same numbers from it. (`random` reseeds itself at fork.)"""
    random = sys.modules.get("numpy.random")
    if random is not None:
        random.seed()


def _send_or_leave(sock: socket.socket, message: dict[str, Any]) -> None:
    try:
        send_message(sock, message)
    except OSError:
        sys.exit(0)  # the server has gone already


if __name__ == "__main__":
    sys.exit(main())
