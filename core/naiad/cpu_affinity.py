"""Which CPUs a thread may run on: the event-loop thread of a worker pinned to one CPU, and
every other thread of the server on all the CPUs the server may use.

Linux gives a new thread (and a new process) the affinity of the thread that starts it, so a
thread started by the pinned loop thread (the first batch on an instance thread, a default
executor's thread, a model process spawned for a restart) would be pinned too, and with it a
framework's thread pool. `release_calling_thread` is what such a thread calls first.
Where the platform has no affinity calls, every function here does nothing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from .cpu_quota import cpu_quota

__all__ = ["usable_cpus", "usable_cpu_count", "pin_calling_thread", "release_calling_thread", "release_process"]

# The CPUs the server may use, recorded before any thread of this process was pinned.
_server_cpus: frozenset[int] | None = None


def usable_cpus() -> tuple[int, ...]:
    """The CPUs the calling thread may run on now, in order; () where it cannot be known."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return ()


def usable_cpu_count() -> int:
    """How many CPUs' worth of work this process may do at once: the CPUs it may run on, or
    fewer when its cgroups allow less CPU time (a container limited to 2 CPUs on a larger
    host: 2; 2.5 CPUs' worth counts as 3)."""
    cores = len(usable_cpus()) or os.cpu_count() or 1
    quota = cpu_quota()
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def pin_calling_thread(cpu: int, server_cpus: Iterable[int]) -> None:
    """Pin the calling thread (only it) to `cpu`; `server_cpus` is what the threads it starts
    get back with `release_calling_thread`. Raises OSError when the kernel refuses."""
    global _server_cpus
    _server_cpus = frozenset(server_cpus)
    os.sched_setaffinity(0, {cpu})


def release_calling_thread() -> None:
    """Give the calling thread every CPU of the server, if a thread of this process was
    pinned; otherwise leave it as it is (the user's own `taskset` included)."""
    cpus = _server_cpus
    if cpus is None:
        return
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:  # a CPU taken away meanwhile (cpuset change): keep what the thread has
        pass


def release_process(cpus: Iterable[int]) -> None:
    """Give every thread of this process the CPUs `cpus`: a worker started again by a pinned
    event-loop thread inherits its single CPU, and threads of imported libraries with it."""
    allowed = set(cpus)
    if not allowed or not hasattr(os, "sched_setaffinity"):
        return
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, allowed)
        except OSError:  # a thread that ended meanwhile, or a CPU no longer allowed
            continue
