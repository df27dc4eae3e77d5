"""`StubForker`: the server's side of the stub template (model_side/stub_template.py), the
process that forks model processes sharing the interpreter, numpy and the stub's code.

One per `PythonBackend`, so one template per server process that runs Python models, started
with the server's own interpreter (`sys.executable`) at the first model process it starts. A
fork request carries the stub's socket and rings (SCM_RIGHTS), its environment, working
directory and arguments; the answer carries the new process's pid and a pidfd of it, and later
its exit status (`ForkedProcess`). A reader thread takes everything the template sends.

Starts go one at a time, and every wait is bounded: a template that does not answer within
`FORK_REPLY_TIMEOUT_S` is killed, one that ended is replaced at the next start. Whenever no
template can serve a start, `start` says so (None) and logs why, and the caller spawns the
process as before: a broken template never stops a model from loading.

The socket is a socketpair: it has no name, so nothing but this server can reach the template.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..model_side.fork_messages import receive_message, send_message
from .forked_process import ForkedProcess, describe_exit

__all__ = ["StubForker"]

log = logging.getLogger("naiad.backends.python")

# Forking a process takes milliseconds; this much silence means the template is stuck.
FORK_REPLY_TIMEOUT_S = 15.0
# Starting the template imports numpy and the stub, as starting one stub does.
TEMPLATE_READY_TIMEOUT_S = 60.0
# After a template failed to start, starts spawn for this long before the next attempt.
RETRY_TEMPLATE_AFTER_S = 30.0
# How long a template told to go (its socket closed) may take before it is killed.
TEMPLATE_EXIT_TIMEOUT_S = 5.0
_TEMPLATE_MODULE = "naiad_backend_python.model_side.stub_template"


class TemplateUnavailable(Exception):
    """The template cannot serve this start; the message says why."""


class StubForker:
    """Forks model processes from this server process's stub template."""

    def __init__(self) -> None:
        # One start at a time, so each answer belongs to the one request in flight.
        self._lock = threading.Lock()
        self._template: _Template | None = None
        self._retry_at = 0.0
        self._closed = False

    def start(self, fds: Sequence[tuple[str, int]], env: dict[str, str], cwd: str, label: str) -> ForkedProcess | None:
        """Fork a stub: `fds` pairs each of its descriptors with the command-line flag that
        names it. None when the template cannot (the reason is logged): spawn it instead,
        with descriptors of its own, since a template that failed may have forked a process
        holding these (it leaves as soon as the server closes its socket)."""
        with self._lock:
            if self._closed:
                return None
            template = self._running_template(env, label)
            if template is None:
                return None
            try:
                return template.fork(fds, env, cwd, label)
            except TemplateUnavailable as exc:
                log.warning("%s: the stub template could not start the model's process (%s); spawning it", label, exc)
                if not template.usable:
                    template.close(kill=True)
                    self._template = None
                return None

    def close(self) -> None:
        """End the template (the processes it forked live on until the server goes)."""
        with self._lock:
            self._closed = True
            template, self._template = self._template, None
        if template is not None:
            template.close()

    def _running_template(self, env: dict[str, str], label: str) -> _Template | None:
        template = self._template
        if template is not None and not template.usable:
            template.close(kill=True)
            log.warning(
                "the stub template (pid %d) has ended (%s); starting a new one",
                template.pid,
                describe_exit(template.process.returncode),
            )
            self._template = template = None
        if template is None:
            if time.monotonic() < self._retry_at:
                return None
            try:
                template = _Template.start(env)
            except TemplateUnavailable as exc:
                self._retry_at = time.monotonic() + RETRY_TEMPLATE_AFTER_S
                log.warning(
                    "%s: cannot start the stub template (%s); model processes are spawned for the next %g s",
                    label,
                    exc,
                    RETRY_TEMPLATE_AFTER_S,
                )
                return None
            self._template = template
        return template


class _Template:
    """One running template: its process, its socket and the thread reading it."""

    def __init__(self, process: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.process = process
        self.pid = process.pid
        self._sock = sock
        # Answers to the request in flight, in order; None: the template has gone.
        self._answers: queue.SimpleQueue[ForkedProcess | dict[str, Any] | None] = queue.SimpleQueue()
        self._children: dict[int, ForkedProcess] = {}  # pid -> handle, until it exits
        self._children_lock = threading.Lock()
        self._pending_label = ""
        self._gone = False  # the socket reached its end: the template ended
        self._stuck = False  # it did not answer in time, or answered nonsense
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"naiad-stub-template-{self.pid}")

    @classmethod
    def start(cls, env: dict[str, str]) -> _Template:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # -P: no working directory on sys.path; each child puts its own there, as `-m` would.
        command = [sys.executable, "-P", "-m", _TEMPLATE_MODULE, "--socket-fd", str(theirs.fileno())]
        try:
            process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
        except OSError as exc:
            ours.close()
            raise TemplateUnavailable(f"cannot run '{sys.executable}': {exc}") from None
        finally:
            theirs.close()
        template = cls(process, ours)
        template._reader.start()
        try:
            answer = template._answer(TEMPLATE_READY_TIMEOUT_S)
            if isinstance(answer, ForkedProcess) or answer.get("op") != "ready":
                reason = answer.get("reason") if isinstance(answer, dict) else None
                raise TemplateUnavailable(str(reason or "it answered something other than ready"))
        except TemplateUnavailable:
            template.close(kill=True)
            raise
        return template

    @property
    def usable(self) -> bool:
        return not (self._gone or self._stuck)

    def fork(self, fds: Sequence[tuple[str, int]], env: dict[str, str], cwd: str, label: str) -> ForkedProcess:
        request = {"op": "fork", "fd_flags": [flag for flag, _ in fds], "args": [], "env": env, "cwd": cwd}
        self._pending_label = label
        try:
            # Never blocks: one request at a time, each answered before the next.
            send_message(self._sock, request, tuple(fd for _, fd in fds), socket.MSG_DONTWAIT)
        except ValueError as exc:
            raise TemplateUnavailable(str(exc)) from None
        except OSError as exc:
            self._stuck = True
            raise TemplateUnavailable(f"cannot reach it: {exc}") from None
        answer = self._answer(FORK_REPLY_TIMEOUT_S)
        if isinstance(answer, ForkedProcess):
            return answer
        if answer.get("op") == "fork_failed":
            raise TemplateUnavailable(str(answer.get("error")))
        self._stuck = True
        raise TemplateUnavailable(f"it answered {answer.get('op')!r} to a fork request")

    def _answer(self, timeout: float) -> ForkedProcess | dict[str, Any]:
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            self._stuck = True
            raise TemplateUnavailable(f"it did not answer within {timeout:g} s") from None
        if answer is None:
            try:
                code: int | None = self.process.wait(TEMPLATE_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
            raise TemplateUnavailable(f"it ended ({describe_exit(code)})")
        return answer

    def _read(self) -> None:
        try:
            while True:
                received = receive_message(self._sock)
                if received is None:
                    break
                self._dispatch(*received)
        except Exception as exc:  # noqa: BLE001 - a broken socket or message: this template is done
            if not self._stuck:
                log.warning("the stub template (pid %d) cannot be read any more: %s", self.pid, exc)
            self._stuck = True
        finally:
            with self._children_lock:
                self._gone = True
                orphans = list(self._children.values())
                self._children.clear()
            for child in orphans:
                child.orphaned()
            self._answers.put(None)

    def _dispatch(self, message: dict[str, Any], fds: list[int]) -> None:
        op = message.get("op")
        if op == "exited":
            with self._children_lock:
                child = self._children.pop(int(message["pid"]), None)
            if child is not None:
                child.exited(int(message["code"]))
        elif op == "forked" and len(fds) == 1:
            child = ForkedProcess(int(message["pid"]), fds.pop(), self._pending_label)
            with self._children_lock:
                self._children[child.pid] = child
            self._answers.put(child)
        else:
            self._answers.put(message)
        for fd in fds:
            os.close(fd)

    def close(self, kill: bool = False) -> None:
        """Tell the template to go (its socket reads as closed) and reap it; `kill`: at once."""
        if kill and self.process.poll() is None:
            self.process.kill()
        try:
            # Wakes the reader too: its receive returns the end of the stream.
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._reader.join(TEMPLATE_EXIT_TIMEOUT_S)
        self._sock.close()
        try:
            self.process.wait(TEMPLATE_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
