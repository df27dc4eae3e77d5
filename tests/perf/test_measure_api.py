"""`naiad.loadgen.measure`, the API `naiad tune` measures with, against a real `naiad serve`:
one step's result, several steps from one event loop, and the arguments it refuses."""

from __future__ import annotations

import asyncio

import pytest

from naiad.loadgen import LoadError, LoadSpec, MeasureSettings, StepResult, measure

QUICK = MeasureSettings(measurement_interval_ms=300, stability_percentage=100.0, max_trials=4)


def test_one_step_by_concurrency_and_one_by_rate_from_one_loop(server):
    async def both() -> tuple[StepResult, StepResult]:
        spec = LoadSpec(url=server.grpc_url, model="add_sub", protocol="grpc", batch_size=2)
        by_concurrency = await measure(spec, concurrency=2, settings=QUICK)
        by_rate = await measure(spec, request_rate=80.0, settings=QUICK)
        return by_concurrency, by_rate

    by_concurrency, by_rate = asyncio.run(both())
    assert (by_concurrency.concurrency, by_concurrency.request_rate) == (2, None)
    assert (by_rate.concurrency, by_rate.request_rate) == (None, 80.0)
    for step in (by_concurrency, by_rate):
        assert set(step.latency_us) == {"avg", "p50", "p90", "p95", "p99"}
        assert step.errors == 0 and step.requests > 20
        assert 3 <= step.windows <= 4 and step.stable  # 100%: three windows agree at once
        # Throughput counts inferences (requests x the batch size of 2) over the last three
        # windows, each at least 300 ms long; the server counted the same requests.
        assert 0.9 <= step.requests * 2 / step.throughput <= 2.0
        assert abs(step.server.requests - step.requests) <= max(10, step.requests // 10)
        assert step.server.compute_infer_us > 0
        assert 0 < step.client_cpu < 1 and step.client_bound is False
    assert by_rate.throughput == pytest.approx(160.0, rel=0.2)  # 80 requests/s of 2


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, ValueError, "measure: give exactly one of concurrency and request_rate"),
        (
            {"concurrency": 1, "request_rate": 5.0},
            ValueError,
            "measure: give exactly one of concurrency and request_rate",
        ),
        ({"concurrency": 0}, LoadError, "concurrency 0: must be 1 or more"),
        ({"request_rate": -1.0}, LoadError, "request rate -1: must be more than 0"),
    ],
)
def test_arguments_it_refuses(server, kwargs, error, message):
    spec = LoadSpec(url=server.http_url, model="add_sub")
    with pytest.raises(error) as raised:
        asyncio.run(measure(spec, settings=QUICK, **kwargs))
    assert str(raised.value) == message
