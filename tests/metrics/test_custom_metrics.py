"""Custom metric families (what Triton's pb_utils.MetricFamily drives): created and
updated through the core registry, including from a model's own execute thread, and
exported by the metrics endpoint."""

import asyncio

import numpy as np
import pytest
from metrics_server import MetricsServer, make_model
from prometheus_text import value

from naiad import Backend, InferenceRequest, InferenceResponse, Model, ModelInstance, NaiadError, Tensor, hookimpl
from naiad.observability.custom_metrics import CustomMetricRegistry, MetricKind


class CountingInstance(ModelInstance):
    """Counts the elements it sees in a custom counter, from the execute thread."""

    def initialize(self):
        registry = self.model.context.server.custom_metrics
        family = registry.family("elements_seen", "Elements this model received", MetricKind.COUNTER)
        self.counter = family.metric({"model": self.model.context.name, "version": str(self.model.context.version)})
        latency = registry.family("batch_elements", "Elements per batch", MetricKind.HISTOGRAM)
        self.histogram = latency.metric({"model": self.model.context.name}, buckets=[2, 8, 32])

    def execute(self, requests):
        out = []
        for request in requests:
            data = request.input("INPUT0").data
            self.counter.increment(data.size)
            self.histogram.observe(data.size)
            out.append(InferenceResponse(outputs=[Tensor.from_numpy("OUTPUT0", data)]))
        return out


class CountingModel(Model):
    def create_instance(self, context):
        return CountingInstance(self, context)


class CountingBackend(Backend):
    name = "counting"
    abi_version = (2, 0)

    def create_model(self, context):
        return CountingModel(context)


class CountingPlugin:
    @hookimpl
    def naiad_backends(self):
        return [CountingBackend]


COUNTING = """backend: "counting" max_batch_size: 0
input [{name:"INPUT0" data_type: TYPE_FP32 dims:[-1]}]
output [{name:"OUTPUT0" data_type: TYPE_FP32 dims:[-1]}]"""


def test_custom_metrics_from_a_model_are_exported(repo):
    make_model(repo, "counting", COUNTING)

    async def go():
        async with MetricsServer(repo, plugins=[CountingPlugin()]) as ms:
            for size in (1, 4, 20):
                await ms.server.infer(
                    InferenceRequest("counting", [Tensor.from_numpy("INPUT0", np.ones(size, np.float32))])
                )
            gauge = ms.server.custom_metrics.family("queue_depth", "Depth of my queue", "gauge").metric({"q": "a"})
            gauge.set(7)
            gauge.increment(-2)
            text, samples, types = await ms.scrape()
            assert types["elements_seen"] == "counter" and types["batch_elements"] == "histogram"
            assert types["queue_depth"] == "gauge"
            assert "# HELP elements_seen Elements this model received" in text
            assert value(samples, "elements_seen", model="counting", version="1") == 25
            assert value(samples, "queue_depth", q="a") == 5
            buckets = {
                le: value(samples, "batch_elements_bucket", model="counting", le=le)
                for le in ("2.0", "8.0", "32.0", "+Inf")
            }
            assert buckets == {"2.0": 1, "8.0": 2, "32.0": 3, "+Inf": 3}
            assert value(samples, "batch_elements_sum", model="counting") == 25
            assert value(samples, "batch_elements_count", model="counting") == 3

            # Removing a family takes it off the endpoint.
            ms.server.custom_metrics.remove_family("queue_depth")
            _, _, types = await ms.scrape()
            assert "queue_depth" not in types

    asyncio.run(go())


def test_custom_metric_rules():
    registry = CustomMetricRegistry(reserved=["nv_inference_count"])
    counter = registry.family("hits", "Hits", MetricKind.COUNTER)
    assert registry.family("hits", "Hits", "counter") is counter
    same = counter.metric({"a": "1"})
    assert counter.metric({"a": "1"}) is same and counter.metric({"a": "2"}) is not same
    same.increment(2.5)
    assert same.value() == 2.5
    cases = [
        (lambda: same.increment(-1), "negative"),
        (lambda: same.set(3), "only gauges can be set"),
        (lambda: same.observe(1), "only histograms observe"),
        (lambda: same.increment("x"), "needs a number"),
        (lambda: registry.family("hits", "Hits", MetricKind.GAUGE), "already exists as a counter"),
        (lambda: registry.family("nv_inference_count", "x", MetricKind.COUNTER), "reserved"),
        (lambda: registry.family("bad-name", "x", MetricKind.COUNTER), "not a valid Prometheus name"),
        (lambda: registry.family("ok", "x", "summary"), "counter, gauge or histogram"),
        (lambda: counter.metric({"bad-label": "1"}), "not a valid Prometheus label"),
        (lambda: counter.metric({}, buckets=[1]), "buckets apply to histograms only"),
        (lambda: registry.family("h", "x", MetricKind.HISTOGRAM).metric({}), "needs its bucket boundaries"),
        (lambda: registry.family("h", "x", MetricKind.HISTOGRAM).metric({}, buckets=[5, 1]), "increasing"),
        (lambda: registry.family("h", "x", MetricKind.HISTOGRAM).metric({}, buckets=[1, float("inf")]), "finite"),
        (lambda: registry.family("h", "x", MetricKind.HISTOGRAM).metric({"le": "1"}, buckets=[1]), "reserved"),
    ]
    for action, message in cases:
        with pytest.raises(NaiadError) as info:
            action()
        assert message in info.value.message, (message, info.value.message)
    histogram = registry.family("h", "x", MetricKind.HISTOGRAM).metric({}, buckets=[1, 10])
    for v in (0.5, 1, 5, 50):
        histogram.observe(v)
    total, count, buckets = histogram.snapshot()
    assert (total, count) == (56.5, 4)
    assert buckets == [(1.0, 2), (10.0, 3), (float("inf"), 4)]


def test_acquired_families_and_series_live_until_their_last_release():
    registry = CustomMetricRegistry()
    first = registry.acquire_family("shared", "Shared", "counter")
    second = registry.acquire_family("shared", "Shared", "counter")
    assert first is second
    a = first.acquire_metric({"model": "m"})
    b = second.acquire_metric({"model": "m"})
    assert a is b
    a.increment(3)
    first.release_metric(a)
    assert first.metrics() == [b] and b.value() == 3  # one holder left
    second.release_metric(b)
    assert first.metrics() == [] and b.removed
    registry.release_family(first)
    assert [f.name for f in registry.families()] == ["shared"]
    registry.release_family(second)
    assert registry.families() == []
    # A histogram has no single value (Triton's rule); its snapshot has sum, count, buckets.
    histogram = registry.acquire_family("h", "H", "histogram").acquire_metric({}, buckets=[1])
    histogram.observe(2)
    with pytest.raises(NaiadError) as info:
        histogram.value()
    assert "no single value()" in info.value.message
    assert histogram.snapshot() == (2.0, 1, [(1.0, 0), (float("inf"), 1)])
