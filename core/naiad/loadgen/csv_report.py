"""`write_csv_report`: `-f FILE.csv` in perf_analyzer's latency report format (its
report_writer with --verbose-csv, server statistics included), so the tools that read
perf_analyzer's CSV (Model Analyzer, genai-perf) read ours: same header, rows sorted by
throughput, microseconds as whole numbers."""

from __future__ import annotations

import csv
from collections.abc import Sequence

from .latency_summary import REPORTED_PERCENTILES
from .step_result import StepResult

__all__ = ["csv_header", "write_csv_report"]


def csv_header(by_concurrency: bool, percentile: int | None) -> list[str]:
    percentiles = sorted(set(REPORTED_PERCENTILES) | ({percentile} if percentile is not None else set()))
    return [
        "Concurrency" if by_concurrency else "Request Rate",
        "Inferences/Second",
        "Client Send",
        "Network+Server Send/Recv",
        "Server Queue",
        "Server Compute Input",
        "Server Compute Infer",
        "Server Compute Output",
        "Client Recv",
        *(f"p{p} latency" for p in percentiles),
        # perf_analyzer leaves the average out when it stabilises on a percentile.
        *(["Avg latency"] if percentile is None else []),
        "request/response",
        "response wait",
    ]


def write_csv_report(path: str, steps: Sequence[StepResult], percentile: int | None) -> None:
    by_concurrency = bool(steps) and steps[0].concurrency is not None
    header = csv_header(by_concurrency or not steps, percentile)
    with open(path, "w", newline="", encoding="utf-8") as file:
        # perf_analyzer ends lines with "\n", not csv's default "\r\n".
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(header)
        for step in sorted(steps, key=lambda s: s.throughput):
            writer.writerow(_row(step, percentile))


def _row(step: StepResult, percentile: int | None) -> list[str]:
    us = int  # perf_analyzer writes whole microseconds (integer division of nanoseconds)
    latency = step.latency_us
    server = step.server
    send, recv = step.client.send_us, step.client.recv_us
    avg = latency.get("avg", 0.0)
    compute = server.compute_input_us + server.compute_infer_us + server.compute_output_us
    # What the client waited for, less what the server accounts for: the network and the
    # server's own send and receive (never below 0, as perf_analyzer caps it).
    network = max(0.0, avg - send - recv - server.queue_us - compute)
    load = step.concurrency if step.concurrency is not None else step.request_rate
    percentiles = sorted(set(REPORTED_PERCENTILES) | ({percentile} if percentile is not None else set()))
    return [
        f"{load:g}" if isinstance(load, float) else str(load),
        f"{step.throughput:g}",
        str(us(send)),
        str(us(network)),
        str(us(server.queue_us)),
        str(us(server.compute_input_us)),
        str(us(server.compute_infer_us)),
        str(us(server.compute_output_us)),
        str(us(recv)),
        *(str(us(latency.get(f"p{p}", 0.0))) for p in percentiles),
        *([str(us(avg))] if percentile is None else []),
        str(us(send) + us(recv)),
        str(us(avg) - us(send) - us(recv)),
    ]
