"""Custom metrics from model.py (pb_utils.MetricFamily / Metric), end to end: requests
through tritonclient over HTTP to `naiad serve`, and the metrics endpoint scraped over HTTP
and read strictly (exact sample names and label sets, as written on the wire). Each check
runs in process mode and in-process."""

from __future__ import annotations

import re
import urllib.request

import numpy as np
import pytest
from python_backend_servers import MODELS

tritonclient_http = pytest.importorskip("tritonclient.http")

COUNTING = ["metrics_counting", "metrics_counting_in_process"]
ERRORS = ["metrics_errors", "metrics_errors_in_process"]
FAMILIES = ("pymodel_requests", "pymodel_last_size", "pymodel_request_elements")


def _serve(*models: str):
    from naiad.testing import ServerProcess

    flags = [flag for name in models for flag in ("--load-model", name)]
    return ServerProcess(MODELS, "--model-control-mode", "explicit", *flags)


@pytest.fixture(scope="module")
def server():
    with _serve(*COUNTING, *ERRORS) as process:
        yield process


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(server) -> dict[str, dict]:
    """{family: {"type", "help", "samples": {(sample name, frozenset(labels)): value}}}."""
    with urllib.request.urlopen(server.metrics_url, timeout=30) as reply:
        text = reply.read().decode()
    families: dict[str, dict] = {}
    family: dict = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[len("# HELP ") :].partition(" ")
            family = families.setdefault(name, {"samples": {}})
            family["help"] = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[len("# TYPE ") :].partition(" ")
            family = families.setdefault(name, {"samples": {}})
            family["type"] = kind
        elif line:
            match = SAMPLE.match(line)
            assert match, f"malformed sample line {line!r}"
            name, labels, value = match.groups()
            key = (name, frozenset(LABEL.findall(labels or "")))
            assert key not in family["samples"], f"duplicate sample {line!r}"
            family["samples"][key] = float(value)
    return families


def of_model(family: dict, model: str) -> dict:
    return {key: value for key, value in family["samples"].items() if ("model", model) in key[1]}


def infer_counting(client, model: str, size: int) -> tuple[float, float]:
    inputs = [tritonclient_http.InferInput("INPUT0", [size], "FP32")]
    inputs[0].set_data_from_numpy(np.ones(size, np.float32))
    result = client.infer(model, inputs)
    return float(result.as_numpy("REQUESTS")[0]), float(result.as_numpy("LAST_SIZE")[0])


@pytest.mark.parametrize("model", COUNTING)
def test_counter_gauge_and_histogram_reach_the_endpoint(server, model):
    client = tritonclient_http.InferenceServerClient(server.http_url)
    sizes = [1, 2, 3, 5, 20]
    for n, size in enumerate(sizes, start=1):
        # value() read back in execute sees every update made before it.
        assert infer_counting(client, model, size) == (n, size - 1)

    families = scrape(server)
    labels = frozenset({"model": model, "version": "1"}.items())
    counter, gauge, histogram = (families[name] for name in FAMILIES)
    assert (counter["type"], gauge["type"], histogram["type"]) == ("counter", "gauge", "histogram")
    assert counter["help"] == "Requests the model executed"
    assert of_model(counter, model) == {("pymodel_requests", labels): 5.0}
    assert of_model(gauge, model) == {("pymodel_last_size", labels): 19.0}
    series = labels | {("unit", "elements")}
    assert of_model(histogram, model) == {
        ("pymodel_request_elements_bucket", series | {("le", "1.0")}): 1.0,
        ("pymodel_request_elements_bucket", series | {("le", "4.0")}): 3.0,
        ("pymodel_request_elements_bucket", series | {("le", "16.0")}): 4.0,
        ("pymodel_request_elements_bucket", series | {("le", "+Inf")}): 5.0,
        ("pymodel_request_elements_count", series): 5.0,
        ("pymodel_request_elements_sum", series): 31.0,
    }


# case -> what the TritonModelException raised in model.py says
ERROR_CASES = {
    "reserved_name": "MetricFamily 'nv_inference_count': metric family name 'nv_inference_count' is reserved",
    "invalid_name": "'bad-name' is not a valid Prometheus name",
    "bad_kind": "kind must be MetricFamily.COUNTER, MetricFamily.GAUGE or MetricFamily.HISTOGRAM, got 'summary'",
    "kind_clash": "metric family 'pyerr_clash' already exists as a counter, not a gauge",
    "negative_increment": "a counter can only be incremented by non-negative values, got -1.0",
    "set_counter": "Failed to set metric 'pyerr_counter': a counter does not support set()",
    "observe_counter": "Failed to observe metric 'pyerr_counter': a counter does not support observe()",
    "observe_gauge": "Failed to observe metric 'pyerr_gauge': a gauge does not support observe()",
    "increment_histogram": "Failed to increment metric 'pyerr_hist': a histogram does not support increment()",
    "value_histogram": "Failed to get the value of metric 'pyerr_hist': a histogram does not support value()",
    "histogram_without_buckets": "a histogram metric needs buckets",
    "buckets_on_gauge": "buckets are for histograms, this family is a gauge",
    "unsorted_buckets": "buckets must be increasing, got [5.0, 1.0]",
    "labels_not_dict": "labels must be a dictionary, got list",
    "invalid_label": "label name 'bad-label' is not a valid Prometheus label",
    "not_a_number": "the value must be a number, got '1'",
    "deleted_family": "Invalid metric operation set() on 'pyerr_short_lived': its MetricFamily has been deleted",
}


@pytest.mark.parametrize("model", ERRORS)
def test_misuse_raises_triton_model_exception_and_the_model_keeps_serving(server, model):
    client = tritonclient_http.InferenceServerClient(server.http_url)

    def run(case: str) -> str:
        inputs = [tritonclient_http.InferInput("CASE", [1], "BYTES")]
        inputs[0].set_data_from_numpy(np.array([case.encode()], dtype=np.object_))
        return client.infer(model, inputs).as_numpy("MESSAGE")[0].decode()

    for case, expected in ERROR_CASES.items():
        message = run(case)
        assert message.startswith("TritonModelException: ") and expected in message, (case, message)
    assert run("valid") == "ok"

    families = scrape(server)
    # Nothing the refused calls tried to create reached the endpoint...
    assert "bad-name" not in families and "pyerr_short_lived" not in families
    assert all("model" in dict(key[1]) for key in families["nv_inference_count"]["samples"])
    # ...and what they did create is there: pyerr_counter was incremented by 2 ("valid").
    assert families["pyerr_counter"]["samples"][("pyerr_counter", frozenset())] >= 2


def test_instances_of_a_model_share_its_series_until_the_last_one_goes():
    model = "metrics_counting_two_instances"
    with _serve(model) as process:
        client = tritonclient_http.InferenceServerClient(process.http_url, concurrency=4)
        # Concurrent requests spread over both model processes; each created the same
        # family and labels in its initialize, so they update one series.
        inputs = [tritonclient_http.InferInput("INPUT0", [3], "FP32")]
        inputs[0].set_data_from_numpy(np.ones(3, np.float32))
        pending = [client.async_infer(model, inputs) for _ in range(12)]
        seen = sorted(float(p.get_result().as_numpy("REQUESTS")[0]) for p in pending)
        assert seen[-1] == 12.0
        labels = frozenset({"model": model, "version": "1"}.items())
        families = scrape(process)
        assert families["pymodel_requests"]["samples"] == {("pymodel_requests", labels): 12.0}
        assert families["pymodel_last_size"]["samples"] == {("pymodel_last_size", labels): 2.0}
        client.unload_model(model)
        assert not any(name in scrape(process) for name in FAMILIES)


def test_a_models_metrics_leave_with_it_and_come_back_fresh():
    with _serve(*COUNTING) as process:
        client = tritonclient_http.InferenceServerClient(process.http_url)
        for model in COUNTING:
            for size in (2, 6):
                infer_counting(client, model, size)
        families = scrape(process)
        for model in COUNTING:
            assert list(of_model(families["pymodel_requests"], model).values()) == [2.0]

        client.unload_model("metrics_counting")
        client.unload_model("metrics_counting_in_process")
        families = scrape(process)
        assert not any(name in families for name in FAMILIES)  # no series left: no family written

        client.load_model("metrics_counting_in_process")
        families = scrape(process)
        assert set(families) >= set(FAMILIES)
        labels = frozenset({"model": "metrics_counting_in_process", "version": "1"}.items())
        assert families["pymodel_requests"]["samples"] == {("pymodel_requests", labels): 0.0}
        assert infer_counting(client, "metrics_counting_in_process", 3) == (1.0, 2.0)
