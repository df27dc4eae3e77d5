"""`naiad serve --workers N`: one logical server over several processes (docs/performance.md)."""

from .supervisor import WorkerPool, is_worker, signal_worker_ready, wait_orphaned
from .topology import WORKER_INDEX_ENV, Topology, default_worker_count, ports_free
from .worker_server import WorkerServer

__all__ = ["WorkerPool", "WorkerServer", "Topology", "WORKER_INDEX_ENV", "default_worker_count", "ports_free",
           "signal_worker_ready", "is_worker", "wait_orphaned"]
