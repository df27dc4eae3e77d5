"""`naiad.loadgen`: the load generator behind `naiad perf` (and `naiad tune`'s measuring
arm): perf_analyzer's measurement over KServe v2 HTTP/REST or gRPC, against any server
that speaks it (naiad, Triton)."""

from __future__ import annotations

from .load_error import LoadError
from .load_spec import LoadSpec, MeasureSettings
from .measure import WindowReport, measure
from .step_result import ClientTimes, ServerBreakdown, StepResult

__all__ = [
    "ClientTimes",
    "LoadError",
    "LoadSpec",
    "MeasureSettings",
    "ServerBreakdown",
    "StepResult",
    "WindowReport",
    "measure",
]
