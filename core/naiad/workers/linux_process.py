"""What a process of `naiad serve --workers N` asks the Linux kernel about itself.

- Its name in `ps`, `top` and /proc/PID/comm: `naiad-worker-N`, `naiad-home`. Processes
  forked from worker 0 keep its command line, so the name is how an operator (and a test)
  tells them apart.
- Its end when worker 0 ends: a worker whose supervisor is gone (killed with SIGKILL, which
  it cannot forward) must not keep serving the shared ports alone, whatever it is doing
  (starting, loading models, serving). The kernel sends it SIGTERM the moment worker 0 exits
  (PR_SET_PDEATHSIG); until its event loop handles SIGTERM, that ends it at once, and after,
  it drains and stops as on any SIGTERM.

Where prctl is not there, these do nothing; `wait_orphaned` (supervisor.py) still notices
within a second once the process serves.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
from pathlib import Path

__all__ = ["name_process", "process_name", "HOME_NAME", "worker_name", "end_with_parent", "make_subreaper"]

HOME_NAME = "naiad-home"
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15  # the kernel keeps the first 15 bytes
_PR_SET_CHILD_SUBREAPER = 36


def worker_name(index: int) -> str:
    return f"naiad-worker-{index}"


def _prctl(option: int, argument: int | bytes) -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        value = ctypes.c_char_p(argument) if isinstance(argument, bytes) else ctypes.c_ulong(argument)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def name_process(name: str) -> None:
    """Name the calling thread (the main thread's name is the process's)."""
    _prctl(_PR_SET_NAME, name.encode()[:15])


def process_name(pid: int) -> str:
    """The name of process `pid`, or "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def end_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """`sig` to this process when `parent` (its parent now) exits; when it has exited
    already (this process was adopted by another), end now. The kernel ties the signal to
    the parent's thread that started this process (or adopted it): worker 0 starts its
    workers from its main thread, which lives as long as it does, and adopts with it."""
    _prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os._exit(1)


def make_subreaper() -> bool:
    """Make this process the one its orphaned descendants are handed to, instead of init;
    whether it is. Worker 0 is, for the workers its fork server starts (fork_server.py)."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)
