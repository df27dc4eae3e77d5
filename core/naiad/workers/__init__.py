"""`naiad serve --workers N`: N front doors and one model home, one logical server
(docs/deployment.md)."""

from .front_door import FrontDoor
from .loop_pinning import PIN_CHOICES, loop_cpu, pin_event_loop
from .model_home import ModelHome
from .supervisor import WorkerPool, is_worker, signal_worker_ready, wait_orphaned, worker_0
from .topology import WORKER_INDEX_ENV, Topology, worker_count

__all__ = [
    "FrontDoor",
    "ModelHome",
    "WorkerPool",
    "Topology",
    "WORKER_INDEX_ENV",
    "worker_count",
    "signal_worker_ready",
    "is_worker",
    "wait_orphaned",
    "worker_0",
    "PIN_CHOICES",
    "loop_cpu",
    "pin_event_loop",
]
