"""Autoscaling on queue pressure: a custom Ray Serve autoscaling policy fed by the replicas.

Requests on the direct path never pass through Ray, so Ray Serve's own count of ongoing
requests does not see them. Each replica reports naiad's queue instead (the sum of
`nv_inference_pending_request_count` over its models: requests received and waiting for an
instance) through Ray Serve's `record_autoscaling_stats` hook, and this policy sizes the
deployment from it. Ray Serve applies `upscale_delay_s`, `downscale_delay_s`, the scaling
factors and the replica bounds to what the policy returns, as for its own policy.
"""

from __future__ import annotations

from typing import Any

from ray.serve.config import AutoscalingContext

__all__ = ["PENDING_REQUESTS", "POLICY", "queue_pressure_policy"]

# The custom metric each replica reports (its name in Ray Serve's autoscaling metrics).
PENDING_REQUESTS = "naiad_pending_requests"
# Import path Ray Serve's controller loads the policy from.
POLICY = "naiad_ray.autoscaling:queue_pressure_policy"


def queue_pressure_policy(ctx: AutoscalingContext) -> tuple[float, dict[str, Any]]:
    """Replicas enough to keep about `target_ongoing_requests` requests pending in each.

    Pending counts naiad's queues (averaged by Ray Serve over `look_back_period_s`) plus the
    requests waiting in Ray Serve's proxies for a replica (zero on the direct path).
    """
    if ctx.current_num_replicas == 0:
        # Nothing listens on the direct path while no replica runs: keep Ray's decision.
        return ctx.target_num_replicas, {}
    per_replica = (ctx.aggregated_metrics or {}).get(PENDING_REQUESTS, {})
    pending = sum(per_replica.values()) + (ctx.total_queued_requests or 0.0)
    return pending / ctx.config.get_target_ongoing_requests(), {}
