"""What `naiad perf` prints: each step as perf_analyzer lays it out (client, server, and the
client's own CPU), then one table of every step."""

from __future__ import annotations

from collections.abc import Sequence

from ..loadgen import StepResult
from ..loadgen.latency_summary import REPORTED_PERCENTILES
from .text_table import text_table

__all__ = ["CLIENT_BOUND_WARNING", "step_text", "summary_table"]

CLIENT_BOUND_WARNING = (
    "warning: the client used {cpu:.0%} of a CPU core: it may be the bottleneck, not the server "
    "(run it on another machine, or give it a core of its own)"
)


def load_label(step: StepResult) -> str:
    if step.concurrency is not None:
        return f"Request concurrency: {step.concurrency}"
    return f"Request rate: {step.request_rate:g}"


def step_text(step: StepResult) -> str:
    latency = step.latency_us
    server = step.server
    lines = [
        load_label(step),
        "  Client:",
        f"    Request count: {step.requests}",
        f"    Throughput: {step.throughput:.1f} infer/sec",
        f"    Avg latency: {latency.get('avg', 0):.0f} usec",
        *(f"    p{p} latency: {latency.get(f'p{p}', 0):.0f} usec" for p in _percentiles(step)),
        f"    Errors: {step.errors}",
        f"    Client CPU: {step.client_cpu:.0%} of one core",
        "  Server:",
        f"    Successful request count: {server.requests}",
        f"    Execution count: {server.executions}",
        f"    Avg request latency: {_server_total(step):.0f} usec (overhead {server.overhead_us:.0f} usec + "
        f"queue {server.queue_us:.0f} usec + compute input {server.compute_input_us:.0f} usec + "
        f"compute infer {server.compute_infer_us:.0f} usec + compute output {server.compute_output_us:.0f} usec)",
    ]
    if not step.stable:
        lines.append(
            f"  warning: not stable after {step.windows} windows (the last three differ by more than the "
            "stability percentage): the figures are the last three windows'"
        )
    if step.client_bound:
        lines.append("  " + CLIENT_BOUND_WARNING.format(cpu=step.client_cpu))
    return "\n".join(lines)


def summary_table(steps: Sequence[StepResult]) -> str:
    by_concurrency = bool(steps) and steps[0].concurrency is not None
    percentiles = _percentiles(steps[0]) if steps else list(REPORTED_PERCENTILES)
    headers = (
        "Concurrency" if by_concurrency else "Request rate",
        "Infer/s",
        *(f"p{p} us" for p in percentiles),
        "Avg us",
        "Queue us",
        "Compute in us",
        "Compute infer us",
        "Compute out us",
        "Overhead us",
        "Client CPU",
        "Errors",
    )
    rows = []
    for step in steps:
        latency = step.latency_us
        server = step.server
        load = str(step.concurrency) if by_concurrency else f"{step.request_rate:g}"
        rows.append(
            (
                load,
                f"{step.throughput:.1f}",
                *(f"{latency.get(f'p{p}', 0):.0f}" for p in percentiles),
                f"{latency.get('avg', 0):.0f}",
                f"{server.queue_us:.0f}",
                f"{server.compute_input_us:.0f}",
                f"{server.compute_infer_us:.0f}",
                f"{server.compute_output_us:.0f}",
                f"{server.overhead_us:.0f}",
                f"{step.client_cpu:.0%}",
                str(step.errors),
            )
        )
    return text_table(headers, rows)


def _percentiles(step: StepResult) -> list[int]:
    return sorted(int(key[1:]) for key in step.latency_us if key.startswith("p"))


def _server_total(step: StepResult) -> float:
    s = step.server
    return s.overhead_us + s.queue_us + s.compute_input_us + s.compute_infer_us + s.compute_output_us
