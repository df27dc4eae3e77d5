"""The name each process of `naiad serve --workers N` shows in `ps`, `top` and /proc/PID/comm:
`naiad-worker-1`, `naiad-home`. Processes forked from worker 0 keep its command line, so
the name is how an operator (and a test) tells them apart."""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

__all__ = ["name_process", "process_name", "HOME_NAME", "worker_name"]

HOME_NAME = "naiad-home"
_PR_SET_NAME = 15  # prctl(2); the kernel keeps the first 15 bytes


def worker_name(index: int) -> str:
    return f"naiad-worker-{index}"


def name_process(name: str) -> None:
    """Name the calling thread (the main thread's name is the process's); does nothing where
    prctl is not there."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def process_name(pid: int) -> str:
    """The name of process `pid`, or "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
