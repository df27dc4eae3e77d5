"""`StepResult`: one measured load step (one concurrency or one request rate)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ClientTimes", "ServerBreakdown", "StepResult"]


@dataclass(frozen=True)
class ServerBreakdown:
    """Where a request's time went inside the server, averaged per request over the step's
    windows, from the statistics extension (`/v2/models/M/stats` read before and after)."""

    queue_us: float = 0.0
    compute_input_us: float = 0.0
    compute_infer_us: float = 0.0
    compute_output_us: float = 0.0
    # The server's request time less queue and compute: protocol, scheduling, copies.
    overhead_us: float = 0.0
    # Successful requests the server counted over the windows (0: no statistics).
    requests: int = 0
    # Model executions (batches) over the windows.
    executions: int = 0


@dataclass(frozen=True)
class ClientTimes:
    """The client's own part of a request's latency (perf_analyzer's Client Send and Client
    Recv): writing the request, and reading the answer from its first byte. 0 over gRPC,
    whose library does both out of sight."""

    send_us: float = 0.0
    recv_us: float = 0.0


@dataclass(frozen=True)
class StepResult:
    concurrency: int | None
    request_rate: float | None
    # Inferences per second: requests per second times the batch size, as perf_analyzer counts.
    throughput: float
    # "avg", "p50", "p90", "p95", "p99", in microseconds.
    latency_us: Mapping[str, float]
    server: ServerBreakdown
    # Fraction of one CPU the client used while measuring.
    client_cpu: float
    # The client's CPU was near a whole core: the figures may be the client's limit.
    client_bound: bool
    # Three consecutive windows agreed within the stability percentage.
    stable: bool
    # Failed requests over the windows reported.
    errors: int
    # Requests completed over the windows reported.
    requests: int = 0
    client: ClientTimes = field(default_factory=ClientTimes)
    # Windows measured before the step was stable or ran out of trials.
    windows: int = 0
    # Latency the stability rule looked at: "avg" or "pNN".
    stabilizing_latency: str = "avg"
