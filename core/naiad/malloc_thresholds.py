"""glibc's malloc thresholds, raised once per server so that a framework's large tensors are
reused from the heap instead of being mapped afresh, page by page, for every batch.

glibc maps a block larger than its mmap threshold (128 KiB at start) from the kernel, and
hands the top of a heap back once more than its trim threshold (256 KiB) lies free there.
Both grow while a process runs, to at most 32 MiB and 64 MiB, but only as far as the largest
mapped block freed so far: a process's speed then depends on the sizes it has seen. PyTorch
takes every activation from malloc: the CNN of docs/performance.md, TorchScript at batch 32
on two CPUs, ran at 4,200 images/s in a fresh process, with 850,000 page faults in five
seconds, until a batch of 64 raised the thresholds; with the thresholds at their ceilings
from the start, it ran at 7,600-7,900 images/s at batches of 31 and 32 (8,200-8,300 at 64),
with 53,000 page faults.

`raise_malloc_thresholds` sets those ceilings (the values glibc would reach on its own) in
this process and, through the environment, in every process it starts: front doors and
model processes. Where the environment already sets malloc's thresholds (a user's tuning,
or the server's own settings inherited by a process it started), or off glibc, it does
nothing.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import MutableMapping

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "is_glibc", "raise_malloc_thresholds"]

MMAP_THRESHOLD = 32 << 20  # glibc's ceiling for its adaptive mmap threshold (64-bit)
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc pairs with it when it adapts

# mallopt's parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

# Environment variables through which glibc takes its thresholds at a process's start.
_MMAP_VARIABLE = "MALLOC_MMAP_THRESHOLD_"
_TRIM_VARIABLE = "MALLOC_TRIM_THRESHOLD_"
_USER_VARIABLES = (_MMAP_VARIABLE, _TRIM_VARIABLE, "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def raise_malloc_thresholds(environ: MutableMapping[str, str] | None = None) -> bool:
    """Raise this process's thresholds and put them in `environ` (os.environ when None) for
    the processes it starts. False when nothing was changed: not glibc, or already set."""
    environ = os.environ if environ is None else environ
    if _already_set(environ) or not is_glibc():
        return False
    mallopt = ctypes.CDLL(None).mallopt
    if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return False
    environ[_MMAP_VARIABLE] = str(MMAP_THRESHOLD)
    environ[_TRIM_VARIABLE] = str(TRIM_THRESHOLD)
    return True


def _already_set(environ: MutableMapping[str, str]) -> bool:
    return any(name in environ for name in _USER_VARIABLES) or "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")


def is_glibc() -> bool:
    """Whether this process runs on glibc, whose malloc these thresholds are."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):  # not a GNU system: no such name
        return False
