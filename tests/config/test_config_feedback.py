"""What a load tells the user about a config that does not say what they meant: a misspelt
field names the field meant (config.pbtxt and a load's JSON override, at any depth), a model
file beside config.pbtxt says where it belongs, and a default that replaces a value the
config writes is logged with both values. Through tritonclient against `naiad serve`."""

from __future__ import annotations

import json

import pytest
import tritonclient.http as httpclient
from triton_servers import explicit_server, load_error
from tritonclient.utils import InferenceServerException

IO = (
    'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }] '
    'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]'
)
IDENTITY = f'backend: "numpy" {IO} parameters {{ key: "op" value: {{ string_value: "identity" }} }}'

CONFIGS = {
    "top_level_typo": f"{IDENTITY}\nmax_batch_sise: 8",
    "nested_typo": f"{IDENTITY}\nmax_batch_size: 8\ndynamic_batching {{ max_queue_delay_microsecond: 100 }}",
    "deep_typo": (
        'backend: "numpy" input [{ name: "INPUT0" data_type: TYPE_FP32 dimz: [4] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]'
    ),
    "no_near_name": f"{IDENTITY}\nzzzzzz: 1",
    "identity": IDENTITY,
    "zero_count": f"{IDENTITY}\ninstance_group [{{ count: 0 kind: KIND_CPU }}]",
    "stray_file": "",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    repository = tmp_path_factory.mktemp("feedback")
    for name, config in CONFIGS.items():
        (repository / name).mkdir()
        (repository / name / "config.pbtxt").write_text(config)
        if name != "stray_file":
            (repository / name / "1").mkdir()
    # Copied one level too high: beside config.pbtxt, not in 1/.
    (repository / "stray_file" / "model.onnx").write_bytes(b"onnx")
    with explicit_server(repository) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        yield server, client, repository


@pytest.mark.parametrize(
    "model,expected",
    [
        ("top_level_typo", "config.pbtxt line 2: unknown field max_batch_sise; did you mean max_batch_size?"),
        (
            "nested_typo",
            "config.pbtxt line 3: unknown field max_queue_delay_microsecond in a ModelDynamicBatching message; "
            "did you mean max_queue_delay_microseconds?",
        ),
        ("deep_typo", "config.pbtxt line 1: unknown field dimz in a ModelInput message; did you mean dims?"),
    ],
)
def test_a_misspelt_field_in_config_pbtxt_names_the_field_meant(served, model, expected):
    _, client, _ = served
    assert load_error(client, model) == f"model '{model}': {expected}"


def test_an_unknown_field_near_no_name_lists_the_known_ones(served):
    _, client, _ = served
    message = load_error(client, "no_near_name")
    assert message.startswith("model 'no_near_name': config.pbtxt line 2: unknown field zzzzzz (known fields: name, ")
    assert ", max_batch_size, " in message


@pytest.mark.parametrize(
    "override,expected",
    [
        ({"max_batch_sise": 8}, "unknown field max_batch_sise; did you mean max_batch_size?"),
        ({"maxBatchSise": 8}, "unknown field maxBatchSise; did you mean maxBatchSize?"),
        (
            {"dynamic_batching": {"max_queue_delay_microsecond": 100}},
            "unknown field max_queue_delay_microsecond in dynamic_batching; did you mean max_queue_delay_microseconds?",
        ),
        (
            {"input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dimz": [4]}]},
            "unknown field dimz in input[0]; did you mean dims?",
        ),
    ],
)
def test_a_misspelt_field_in_a_config_override_names_the_field_meant(served, override, expected):
    _, client, _ = served
    with pytest.raises(InferenceServerException) as info:
        client.load_model("identity", config=json.dumps({"backend": "numpy", **override}))
    assert info.value.message() == f"model 'identity': config JSON: {expected}"


def test_a_model_file_beside_config_pbtxt_says_move_it_into_the_version_folder(served):
    server, client, repository = served
    # A client sees the path within the model directory; the server's log, the whole path.
    assert load_error(client, "stray_file") == (
        "model 'stray_file': model.onnx lies beside config.pbtxt, but model files belong in numbered version "
        "directories: move it into 1/ (1/model.onnx)"
    )
    assert f"move it into 1/ ({repository / 'stray_file' / '1' / 'model.onnx'})" in server.log()


def test_a_default_that_replaces_a_written_value_is_logged_with_both(served):
    server, client, _ = served
    client.load_model("zero_count")
    config = client.get_model_config("zero_count")
    assert config["instance_group"][0]["count"] == 1
    assert (
        "model 'zero_count': Triton's defaults changed instance_group[0].count from 0 (as config.pbtxt writes it) to 1"
        in server.log()
    )


def test_a_config_whose_values_all_stand_logs_no_change(served):
    server, client, _ = served
    client.load_model("identity")
    assert client.is_model_ready("identity")
    assert "model 'identity': Triton's defaults changed" not in server.log()
    assert "model 'identity': auto-complete" not in server.log()
