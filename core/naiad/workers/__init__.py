"""`naiad serve --workers N`: one logical server over several processes."""

from .supervisor import (WORKER_INDEX_ENV, WORKER_READY_FD_ENV, WorkerPool, is_worker, signal_worker_ready,
                         wait_orphaned, worker_arguments)

__all__ = ["WorkerPool", "WORKER_READY_FD_ENV", "WORKER_INDEX_ENV", "worker_arguments", "signal_worker_ready",
           "is_worker", "wait_orphaned"]
