"""`ForkedProcess`: a model process forked by the stub template, handled as the server handles
the `subprocess.Popen` of a spawned one (`StubProcess` is what both offer).

The process is the template's child, not the server's, so the server cannot wait for it: the
template reaps it and sends its exit status, which `StubForker` hands to `exited`. The server
also holds a pidfd of it, which names that very process for as long as the descriptor is open:
a signal sent through it can never reach another process that took over the pid after the
template reaped this one (a plain `kill(pid)` could, in the moment between the reaping and the
server hearing of it).

The end of the process itself is read from the pidfd, whatever became of the template. If the
template ended first, nobody who could learn the status is left (the process now belongs to
init); if it is stuck, it will not send it. Either way the return code is then
`EXIT_STATUS_UNKNOWN` (after `STATUS_GRACE_S`, or at once once the template is known to have
ended), which `describe_exit` words as such: a wait never hangs on the template.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from typing import Protocol

__all__ = ["EXIT_STATUS_UNKNOWN", "ForkedProcess", "StubProcess", "describe_exit"]

# Not an exit code (0..255) nor a signal (minus 1..64).
EXIT_STATUS_UNKNOWN = -1000
# How long after the process ended its status may take to come from a template that still
# runs (it is usually there within a millisecond): longer, and the template is stuck.
STATUS_GRACE_S = 5.0


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode == EXIT_STATUS_UNKNOWN:
        return "exit status unknown: the stub template that forked it did not report it"
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class StubProcess(Protocol):
    """What `StubConnection` uses of a model process: `subprocess.Popen` and `ForkedProcess`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class ForkedProcess:
    """A model process the stub template forked, seen from the server."""

    def __init__(self, pid: int, pidfd: int, label: str) -> None:
        self.pid = pid
        self.args = [f"<{label}, forked by the stub template>"]  # for TimeoutExpired's message
        self.returncode: int | None = None
        self._pidfd = pidfd  # -1 once the exit is known
        self._orphaned = False  # the template ended before this process
        self._ended_at: float | None = None  # when the pidfd first said the process ended
        self._changed = threading.Condition(threading.Lock())

    def __repr__(self) -> str:
        return f"ForkedProcess(pid={self.pid}, returncode={self.returncode})"

    # -- from StubForker's reader thread -----------------------------------------------------

    def exited(self, code: int) -> None:
        """The template reaped the process: `code` is its Popen-style return code."""
        with self._changed:
            self._settle(code)

    def orphaned(self) -> None:
        """The template ended: no status will come, the pidfd is the only news of this process."""
        with self._changed:
            self._orphaned = True
            self._changed.notify_all()

    # -- Popen's interface ---------------------------------------------------------------

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            if self.returncode is not None:
                return self.returncode
            # Watch a copy, so that another thread settling the process (and closing the
            # original) cannot leave this one polling a number that now names something else.
            watched = os.dup(self._pidfd)
        # The process's end comes from the pidfd, whatever became of the template...
        try:
            ended = _pidfd_readable(watched, None if deadline is None else max(0.0, deadline - time.monotonic()))
        finally:
            os.close(watched)
        if not ended:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        # ...and its status from the template, a moment later, unless it is gone or stuck.
        with self._changed:
            if self._ended_at is None:
                self._ended_at = time.monotonic()
            give_up_at = self._ended_at + STATUS_GRACE_S
            until = give_up_at if deadline is None else min(give_up_at, deadline)
            while self.returncode is None and not self._orphaned:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            if self.returncode is None:
                if not self._orphaned and time.monotonic() < give_up_at:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)  # the caller's bound came first
                self._settle(EXIT_STATUS_UNKNOWN)
            assert self.returncode is not None
            return self.returncode

    def send_signal(self, sig: int) -> None:
        """As Popen's: nothing once the process is known to have ended."""
        with self._changed:
            if self.returncode is not None or self._pidfd < 0:
                return
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                pass  # it has ended; its status is on its way

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    # -- internals ------------------------------------------------------------------------

    def _settle(self, code: int) -> None:
        """Record the return code and let the pidfd go; call holding `_changed`."""
        if self.returncode is None:
            self.returncode = code
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
        self._changed.notify_all()

    def __del__(self) -> None:
        # A handle dropped while its process still runs (an orphan nobody waited for).
        if getattr(self, "_pidfd", -1) >= 0:
            try:
                os.close(self._pidfd)
            except OSError:
                pass


def _pidfd_readable(pidfd: int, timeout: float | None) -> bool:
    """Whether the process ended within `timeout` seconds (a pidfd reads as ready then)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else int(timeout * 1000)))
