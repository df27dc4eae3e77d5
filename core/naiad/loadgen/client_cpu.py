"""`CpuClock`: the CPU this process used against the wall clock, so a step can say what
fraction of one core the client itself took (perf_analyzer reports no such figure)."""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["CLIENT_BOUND_FRACTION", "CpuClock"]

# A client near a whole core cannot send faster: its figures may be its own limit. The
# event loop is one thread, so one core is the ceiling (gRPC's own threads add a little).
CLIENT_BOUND_FRACTION = 0.9


@dataclass(frozen=True, slots=True)
class CpuClock:
    cpu_s: float
    wall_s: float

    @classmethod
    def now(cls) -> CpuClock:
        return cls(time.process_time(), time.perf_counter())

    def fraction_since(self, earlier: CpuClock) -> float:
        wall = self.wall_s - earlier.wall_s
        return (self.cpu_s - earlier.cpu_s) / wall if wall > 0 else 0.0
