"""opentelemetry trace mode: one traced request as OpenTelemetry spans."""

from __future__ import annotations

from typing import Any

from .request_trace import RequestTrace

__all__ = ["export_spans"]


def export_spans(tracer: Any, trace: RequestTrace, to_epoch_ns: int) -> None:
    """One traced request as spans: `InferRequest` with its timestamps as events, and
    `queue` and `compute` children where the request reached them."""
    from opentelemetry import trace as otel  # type: ignore[import-not-found]

    stamps = dict(trace.timestamps)
    start = min(ns for _, ns in trace.timestamps) + to_epoch_ns
    end = max(ns for _, ns in trace.timestamps) + to_epoch_ns
    root = tracer.start_span(
        "InferRequest",
        start_time=start,
        attributes={
            "triton.model_name": trace.model_name,
            "triton.model_version": trace.model_version,
            "triton.trace_id": trace.id,
            "triton.request_id": trace.request_id,
            **({"naiad.protocol": trace.protocol} if trace.protocol else {}),
        },
    )
    for name, ns in sorted(trace.timestamps, key=lambda t: t[1]):
        root.add_event(name, timestamp=ns + to_epoch_ns)
    context = otel.set_span_in_context(root)
    if "QUEUE_START" in stamps and "COMPUTE_START" in stamps:
        queue = tracer.start_span("queue", context=context, start_time=stamps["QUEUE_START"] + to_epoch_ns)
        queue.end(end_time=stamps["COMPUTE_START"] + to_epoch_ns)
    if "COMPUTE_START" in stamps and "COMPUTE_END" in stamps:
        compute = tracer.start_span("compute", context=context, start_time=stamps["COMPUTE_START"] + to_epoch_ns)
        compute.end(end_time=stamps["COMPUTE_END"] + to_epoch_ns)
    root.end(end_time=end)
