"""Request tracing, log and metrics settings, per-model statistics, latency summaries
and the custom metrics models define. The Prometheus exposition itself is a frontend
(`naiad.frontends.metrics`)."""
