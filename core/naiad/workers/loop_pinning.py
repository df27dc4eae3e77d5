"""`--pin-loop-threads`: each worker's event-loop thread on a CPU of its own.

Unpinned, the kernel moves the workers' loops between the CPUs as they and the model
processes they hand batches to wake, so two loops often queue on one CPU while their model
processes wait on the other: on two cores at eight connections, HTTP's p99 was 680-900 us.
With each loop thread on its own CPU it was 585-620 us (docs/performance.md, ninth steps).

Only the loop thread is pinned. Everything else a worker runs (instance threads, the default
executor, framework thread pools, model processes) keeps every CPU of the server, so a model
can still use every core and a busy CPU does not hold back the work that can move. Pinning
each worker whole, with its model processes, was tried and starved the worker that shared its
CPU with the load generator.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from ..cpu_affinity import pin_calling_thread, release_calling_thread
from .topology import Topology

__all__ = ["PIN_CHOICES", "loop_cpu", "pin_event_loop"]

PIN_CHOICES = ("auto", "off")


def loop_cpu(setting: str, topology: Topology | None) -> int | None:
    """The CPU this worker's loop thread goes on, or None. `auto` pins in the default layout,
    several workers and one per usable CPU: worker i takes the i-th. With fewer workers than
    CPUs it does not, since every server on the machine would pick the same first CPUs (two
    `--workers 2` servers on one host would share CPUs 0 and 1 and leave the rest idle); with
    more, two loops would share a CPU."""
    if setting == "off" or topology is None or topology.count < 2 or topology.count != len(topology.cpus):
        return None
    return topology.cpus[topology.index]


def pin_event_loop(loop: asyncio.AbstractEventLoop, cpu: int, cpus: tuple[int, ...]) -> None:
    """Pin the calling thread, which runs `loop`, to `cpu`. The loop's default executor is
    replaced first by one whose threads give themselves `cpus` back: they are started by the
    loop thread when work arrives, and would inherit its single CPU (and pass it on to a model
    process spawned from them). Raises OSError when the kernel refuses; nothing is pinned then."""
    loop.set_default_executor(
        ThreadPoolExecutor(thread_name_prefix="naiad-executor", initializer=release_calling_thread)
    )
    pin_calling_thread(cpu, cpus)
