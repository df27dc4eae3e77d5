"""Where a process stands in `naiad serve --workers N`: a front door (its index, how many
there are) or the model home, the directory holding their sockets, and the CPUs the server
may use."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from dataclasses import dataclass

from ..cpu_affinity import usable_cpu_count, usable_cpus

__all__ = [
    "Topology",
    "worker_count",
    "WORKER_INDEX_ENV",
    "WORKER_COUNT_ENV",
    "WORKER_DIR_ENV",
    "WORKER_RESTARTED_ENV",
    "WORKER_CPUS_ENV",
    "WORKER_ROLE_ENV",
]

WORKER_INDEX_ENV = "NAIAD_WORKER_INDEX"
WORKER_COUNT_ENV = "NAIAD_WORKER_COUNT"
WORKER_DIR_ENV = "NAIAD_WORKER_DIR"
# Set for a worker started again after it died: it replays worker 0's journal before serving.
WORKER_RESTARTED_ENV = "NAIAD_WORKER_RESTARTED"
# The CPUs worker 0 could use when it started ("0,1"), before any event loop was pinned.
WORKER_CPUS_ENV = "NAIAD_WORKER_CPUS"
# "home" in the model home; unset in the front doors.
WORKER_ROLE_ENV = "NAIAD_WORKER_ROLE"


@dataclass(frozen=True)
class Topology:
    index: int
    count: int
    directory: str
    restarted: bool = False
    cpus: tuple[int, ...] = ()  # () where the platform cannot tell
    home: bool = False  # this process is the model home

    # The worker that is the model home; worker 0 supervises, so that a model which takes its
    # process down (a crash in a framework) leaves a supervisor to start it again.
    home_index = 1

    @property
    def home_path(self) -> str:
        """The model home's socket for the front doors' requests."""
        return os.path.join(self.directory, "home.sock")

    @classmethod
    def create(cls, count: int) -> Topology:
        """Worker 0's topology, with a fresh socket directory only this user can enter."""
        return cls(0, count, tempfile.mkdtemp(prefix="naiad-workers-"), cpus=usable_cpus())

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    @classmethod
    def from_environment(cls) -> Topology | None:
        """The topology worker 0 gave this process; None when it is not an extra worker."""
        directory = os.environ.get(WORKER_DIR_ENV)
        if not directory:
            return None
        return cls(
            int(os.environ[WORKER_INDEX_ENV]),
            int(os.environ[WORKER_COUNT_ENV]),
            directory,
            os.environ.get(WORKER_RESTARTED_ENV) == "1",
            tuple(int(cpu) for cpu in os.environ.get(WORKER_CPUS_ENV, "").split(",") if cpu),
            os.environ.get(WORKER_ROLE_ENV) == "home",
        )

    def environment_of(self, index: int, restarted: bool, home: bool = False) -> dict[str, str]:
        """The variables that make front door `index` of this topology, or its model home."""
        return {
            WORKER_INDEX_ENV: str(index),
            WORKER_COUNT_ENV: str(self.count),
            WORKER_DIR_ENV: self.directory,
            WORKER_RESTARTED_ENV: "1" if restarted else "0",
            WORKER_CPUS_ENV: ",".join(map(str, self.cpus)),
            WORKER_ROLE_ENV: "home" if home else "",
        }


# With this many CPUs or fewer, one process serves faster than a model home and front doors:
# the hop to the model home costs the CPUs about what it saves the model home
# (docs/performance.md, "Front doors and the model home").
ONE_PROCESS_UP_TO_CPUS = 2


def worker_count(requested: int | None, shared_ports: list[tuple[str, int]]) -> int:
    """How many workers `naiad serve` runs; raises ValueError for a count it cannot honour.

    Not given, it is one per CPU this process may use (cgroup-aware: `usable_cpu_count`),
    except where one process is what fits: with two CPUs or fewer (measured faster), and
    where the workers could not share the ports, which must therefore be known before any of
    them starts (an ephemeral port, 0, means one process). A port some server already listens
    on also means one process: the workers bind with SO_REUSEPORT, which would let them join
    another server of the same user on its port instead of failing, so one process starts and
    its frontend refuses the port with its own error."""
    fixed = all(port != 0 for _, port in shared_ports)
    if requested is None:
        cpus = usable_cpu_count()
        requested = cpus if fixed and cpus > ONE_PROCESS_UP_TO_CPUS else 1
    if requested < 1:
        raise ValueError(f"--workers: must be at least 1, got {requested}")
    if requested > 1 and not fixed:
        raise ValueError("--workers > 1 needs fixed --http-port and --grpc-port (the workers share them)")
    if requested > 1 and not _ports_free(shared_ports):
        return 1
    return requested


def _ports_free(addresses: list[tuple[str, int]]) -> bool:
    for host, port in addresses:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True
