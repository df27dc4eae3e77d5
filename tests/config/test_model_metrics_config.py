"""`model_metrics` is checked at load as Triton checks it (qa/L0_model_config/model_metrics):
a metric control without identifier, family, histogram options or buckets is refused with
Triton's message; a family that has no buckets to set loads with Triton's warning."""

from __future__ import annotations

import pytest
import tritonclient.http as httpclient
from triton_servers import explicit_server, load_error

IDENTITY = """backend: "numpy" max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [-1] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1] }]
parameters { key: "op" value { string_value: "identity" } }
"""

BUCKETS = "histogram_options: { buckets: [1, 2, 4, 8] }"
FIRST_RESPONSE = 'metric_identifier: { family: "nv_inference_first_response_histogram_ms" }'

# (model, the metric control, the text Triton's log shows)
INVALID = [
    ("no_metric_identifier", BUCKETS, "metric control must specify 'metric_identifier'"),
    ("no_metric_family", f"metric_identifier: {{}} {BUCKETS}", "metric identifier must specify non-empty 'family'"),
    (
        "empty_metric_family",
        f'metric_identifier: {{ family: "" }} {BUCKETS}',
        "metric identifier must specify non-empty 'family'",
    ),
    ("no_histogram_options", FIRST_RESPONSE, "metric control must specify 'histogram_options'"),
    ("no_buckets", f"{FIRST_RESPONSE} histogram_options: {{}}", "histogram options must specify non-empty 'buckets'"),
    (
        "empty_buckets",
        f"{FIRST_RESPONSE} histogram_options: {{ buckets: [] }}",
        "histogram options must specify non-empty 'buckets'",
    ),
]
VALID = [
    ("valid_model_metrics", f"{FIRST_RESPONSE} {BUCKETS}"),
    ("unknown_metric_family", f'metric_identifier: {{ family: "nv_inference_request_success" }} {BUCKETS}'),
]
UNKNOWN_FAMILY_WARNING = (
    "Metric family 'nv_inference_request_success' in 'metric_identifier' is not a customizable metric in Triton core."
)


@pytest.fixture(scope="module")
def loads(tmp_path_factory):
    """Every case loaded once through one server: (load errors by model, server log)."""
    repository = tmp_path_factory.mktemp("model_metrics")
    for name, control in [(n, c) for n, c, _ in INVALID] + VALID:
        (repository / name / "1").mkdir(parents=True)
        text = IDENTITY + f"model_metrics {{ metric_control: [{{ {control} }}] }}\n"
        (repository / name / "config.pbtxt").write_text(text)
    with explicit_server(repository, "--metrics-config", "histogram_latencies=true") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        errors = {name: load_error(client, name) for name, _, _ in INVALID}
        for name, _ in VALID:
            client.load_model(name)
            assert client.is_model_ready(name)
        return errors, server.log()


@pytest.mark.parametrize("name,control,expected", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_metric_control_is_refused_with_tritons_message(loads, name, control, expected):
    errors, _ = loads
    assert expected in errors[name]


def test_a_family_without_buckets_to_set_loads_with_tritons_warning(loads):
    _, log = loads
    assert UNKNOWN_FAMILY_WARNING in log
    assert log.count(UNKNOWN_FAMILY_WARNING) == 1  # the valid family is not warned about
