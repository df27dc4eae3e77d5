"""Misuses the custom-metrics API as the request's CASE says and answers with what
pb_utils raised: "TritonModelException: <message>", or "ok" when nothing was raised."""

import numpy as np
import triton_python_backend_utils as pb_utils

# Families live as long as the model (a metric is usable only while its family object is).
KEPT = []


class MetricFamily:
    """pb_utils.MetricFamily, kept alive. (Triton binds pb_utils.MetricFamily only once the
    model runs, so it is looked up at call time, never at import.)"""

    COUNTER, GAUGE, HISTOGRAM = "COUNTER", "GAUGE", "HISTOGRAM"

    def __new__(cls, name, description, kind):
        if kind in ("COUNTER", "GAUGE", "HISTOGRAM"):
            kind = getattr(pb_utils.MetricFamily, kind)
        family = pb_utils.MetricFamily(name, description, kind)
        KEPT.append(family)
        return family


def _counter(name="pyerr_counter"):
    return MetricFamily(name, "a counter", MetricFamily.COUNTER)


def _deleted_family_metric():
    family = pb_utils.MetricFamily("pyerr_short_lived", "dropped at once", pb_utils.MetricFamily.GAUGE)
    metric = family.Metric({"a": "b"})
    del family
    metric.set(1)


CASES = {
    "reserved_name": lambda: MetricFamily("nv_inference_count", "clash", MetricFamily.COUNTER),
    "invalid_name": lambda: MetricFamily("bad-name", "x", MetricFamily.GAUGE),
    "bad_kind": lambda: MetricFamily("pyerr_kind", "x", "summary"),
    "kind_clash": lambda: (_counter("pyerr_clash"), MetricFamily("pyerr_clash", "x", MetricFamily.GAUGE)),
    "negative_increment": lambda: _counter().Metric().increment(-1),
    "set_counter": lambda: _counter().Metric().set(3),
    "observe_counter": lambda: _counter().Metric().observe(1),
    "observe_gauge": lambda: MetricFamily("pyerr_gauge", "g", MetricFamily.GAUGE).Metric().observe(1),
    "increment_histogram": lambda: (
        MetricFamily("pyerr_hist", "h", MetricFamily.HISTOGRAM).Metric(buckets=[1]).increment(1)
    ),
    "value_histogram": lambda: MetricFamily("pyerr_hist", "h", MetricFamily.HISTOGRAM).Metric(buckets=[1]).value(),
    "histogram_without_buckets": lambda: MetricFamily("pyerr_hist", "h", MetricFamily.HISTOGRAM).Metric(),
    "buckets_on_gauge": lambda: MetricFamily("pyerr_gauge", "g", MetricFamily.GAUGE).Metric(buckets=[1, 2]),
    "unsorted_buckets": lambda: MetricFamily("pyerr_hist", "h", MetricFamily.HISTOGRAM).Metric(
        labels={"x": "1"}, buckets=[5, 1]
    ),
    "labels_not_dict": lambda: _counter().Metric(labels=["a"]),
    "invalid_label": lambda: _counter().Metric(labels={"bad-label": "1"}),
    "not_a_number": lambda: _counter().Metric().increment("1"),
    "deleted_family": _deleted_family_metric,
    "valid": lambda: _counter().Metric().increment(2),
}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            case = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy().reshape(-1)[0].decode()
            try:
                CASES[case]()
                message = "ok"
            except pb_utils.TritonModelException as exc:
                message = f"TritonModelException: {exc.message()}"
            except Exception as exc:  # noqa: BLE001 - anything else is reported as such
                message = f"{type(exc).__name__}: {exc}"
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("MESSAGE", np.array([message.encode()], dtype=np.object_))])
            )
        return responses
