"""The request, queue, compute-infer and batch-size histograms: exact counts that equal the
statistics extension, buckets from the model's `model_metrics` block, a clear refusal of
buckets that do not increase, `duration_histograms=false`, and text that promtool and
prometheus_client's parser accept."""

import asyncio
import shutil
import subprocess

import numpy as np
import pytest
from metrics_server import ADD_SUB, MetricsServer, make_model
from prometheus_text import value

from naiad import InferenceRequest, NaiadError, Tensor

HISTOGRAMS = (
    "nv_inference_request_duration_seconds",
    "nv_inference_queue_duration_seconds",
    "nv_inference_compute_infer_duration_seconds",
    "nv_inference_batch_size",
)


def add_sub(batch, model="add_sub"):
    a = np.arange(4 * batch, dtype=np.float32).reshape(batch, 4)
    return InferenceRequest(model, [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", a)])


def scrape_after(repo, requests, *flags):
    async def go():
        async with MetricsServer(repo, *flags) as ms:
            for request in requests:
                await ms.server.infer(request)
            stats = ms.server.statistics("add_sub")[0]
            return (*await ms.scrape(), stats)

    return asyncio.run(go())


def test_histograms_count_every_request_and_batch(repo):
    # add_sub has no dynamic batcher: each request is one execution of its own batch size.
    text, samples, types, stats = scrape_after(repo, [add_sub(1), add_sub(1), add_sub(3), add_sub(8)])
    labels = {"model": "add_sub", "version": "1"}
    for name in HISTOGRAMS:
        assert types[name] == "histogram"
    assert (
        value(samples, "nv_inference_request_duration_seconds_count", **labels)
        == 4
        == stats["inference_stats"]["success"]["count"]
    )
    assert value(samples, "nv_inference_queue_duration_seconds_count", **labels) == 4
    assert value(samples, "nv_inference_compute_infer_duration_seconds_count", **labels) == 4
    # The sum is the statistics extension's total, in seconds.
    total_s = value(samples, "nv_inference_request_duration_seconds_sum", **labels)
    assert total_s == pytest.approx(stats["inference_stats"]["success"]["ns"] / 1e9)
    # Batch sizes 1, 1, 3, 8 into buckets 1, 2, 4, 8 (powers of two up to max_batch_size 8).
    buckets = {
        le: value(samples, "nv_inference_batch_size_bucket", le=le, **labels)
        for le in ("1.0", "2.0", "4.0", "8.0", "+Inf")
    }
    assert buckets == {"1.0": 2, "2.0": 2, "4.0": 3, "8.0": 4, "+Inf": 4}
    assert value(samples, "nv_inference_batch_size_sum", **labels) == 13
    # Every duration lands at or below the +Inf bucket, and the buckets never decrease.
    bounds = [
        line
        for line in text.splitlines()
        if line.startswith('nv_inference_request_duration_seconds_bucket{model="add_sub"')
    ]
    counts = [float(line.rsplit(" ", 1)[1]) for line in bounds]
    assert counts == sorted(counts) and counts[-1] == 4
    assert len(bounds) == 18  # 17 default bounds and +Inf


def test_model_metrics_sets_buckets(repo):
    make_model(
        repo,
        "add_sub",
        ADD_SUB
        + """
model_metrics { metric_control [
  { metric_identifier { family: "nv_inference_request_duration_seconds" } histogram_options { buckets: [ 60 ] } },
  { metric_identifier { family: "nv_inference_batch_size" } histogram_options { buckets: [ 2, 5 ] } } ] }""",
    )
    _, samples, _, _ = scrape_after(repo, [add_sub(1), add_sub(4), add_sub(6)])
    labels = {"model": "add_sub", "version": "1"}
    assert value(samples, "nv_inference_request_duration_seconds_bucket", le="60.0", **labels) == 3
    assert ("nv_inference_request_duration_seconds_bucket", frozenset({**labels, "le": "5e-05"}.items())) not in samples
    batch = {le: value(samples, "nv_inference_batch_size_bucket", le=le, **labels) for le in ("2.0", "5.0", "+Inf")}
    assert batch == {"2.0": 1, "5.0": 2, "+Inf": 3}
    # Families the block does not name keep their defaults.
    assert value(samples, "nv_inference_queue_duration_seconds_bucket", le="10.0", **labels) == 3


def test_buckets_that_do_not_increase_are_refused(repo):
    make_model(
        repo,
        "add_sub",
        ADD_SUB
        + """
model_metrics { metric_control [
  { metric_identifier { family: "nv_inference_queue_duration_seconds" } histogram_options { buckets: [ 5, 1 ] } } ] }""",
    )

    async def go():
        async with MetricsServer(repo) as ms:
            index = {row["name"]: row for row in ms.server.repository_index()}
            return index["add_sub"]

    row = asyncio.run(go())
    assert row["state"] == "UNAVAILABLE"
    assert (
        "model 'add_sub': model_metrics buckets of 'nv_inference_queue_duration_seconds' must strictly increase, got [5, 1]"
        in row["reason"]
    )


def test_duration_histograms_false_leaves_them_out(repo):
    _, _, types, _ = scrape_after(repo, [add_sub(1)], "--metrics-config", "duration_histograms=false")
    assert not set(HISTOGRAMS) & set(types)
    assert types["nv_inference_request_duration_us"] == "counter"


def test_unknown_metrics_config_names_the_new_setting(repo):
    with pytest.raises(NaiadError, match="duration_histograms"):
        scrape_after(repo, [], "--metrics-config", "bogus=1")


def test_histograms_pass_promtool_and_prometheus_client(repo):
    text, *_ = scrape_after(repo, [add_sub(1), add_sub(2)], "--metrics-config", "summary_latencies=true")
    from prometheus_client.parser import text_string_to_metric_families

    families = {f.name: f for f in text_string_to_metric_families(text)}
    request = families["nv_inference_request_duration_seconds"]
    assert request.type == "histogram"
    assert {s.name for s in request.samples} == {
        "nv_inference_request_duration_seconds_bucket",
        "nv_inference_request_duration_seconds_sum",
        "nv_inference_request_duration_seconds_count",
    }
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package prometheus; .ci/run installs it)")
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    problems = (checked.stdout + checked.stderr).splitlines()
    # Exit 1 is text promtool cannot read; 3 is naming advice, which only Triton's own
    # families (their names fixed by dashboards: counters without _total, _us units) get.
    assert checked.returncode == 3, problems
    assert not any("error" in line for line in problems), problems
    assert all(line.split(" ")[0] not in HISTOGRAMS for line in problems), problems
    # naiad's histograms alone: nothing to say at all.
    ours = "".join("# HELP " + block for block in text.split("# HELP ")[1:] if block.split(" ", 1)[0] in HISTOGRAMS)
    alone = subprocess.run([promtool, "check", "metrics"], input=ours, capture_output=True, text=True, timeout=60)
    assert len(ours) > 1000 and alone.returncode == 0, alone.stderr
