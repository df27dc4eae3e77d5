"""`naiad serve --workers N`: one logical server over several processes (docs/performance.md)."""

from .loop_pinning import PIN_CHOICES, loop_cpu, pin_event_loop
from .supervisor import WorkerPool, is_worker, signal_worker_ready, wait_orphaned
from .topology import WORKER_INDEX_ENV, Topology, worker_count
from .worker_server import WorkerServer

__all__ = [
    "WorkerPool",
    "WorkerServer",
    "Topology",
    "WORKER_INDEX_ENV",
    "worker_count",
    "signal_worker_ready",
    "is_worker",
    "wait_orphaned",
    "PIN_CHOICES",
    "loop_cpu",
    "pin_event_loop",
]
