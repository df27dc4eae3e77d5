"""Triton's Python auto-complete cases (qa/L0_model_config/autofill_noplatform/python and
autofill_noplatform_success/python), our own copies, through a real server and tritonclient:
a config that leaves a tensor's datatype or dims to `auto_complete_config` is completed to
Triton's expected config (read back over gRPC, for a host without GPUs), and what Triton
refuses fails with Triton's message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess, gpu_ids

FP32_4 = {"data_type": "TYPE_FP32", "dims": [4]}
TENSORS = {
    "inputs": [{"name": "INPUT0", **FP32_4}, {"name": "INPUT1", **FP32_4}],
    "outputs": [{"name": "OUTPUT0", **FP32_4}, {"name": "OUTPUT1", **FP32_4}],
}

MODEL_PY = """
import json

TENSORS = json.loads({tensors!r})


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.set_max_batch_size({max_batch_size})
        for spec in TENSORS["inputs"]:
            config.add_input(spec)
        for spec in TENSORS["outputs"]:
            config.add_output(spec)
        {extra}
        {returns}

    def execute(self, requests):
        return None
"""

FULL_CONFIG = (
    'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [4] }] '
    'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [4] }]'
)


def without(kind: str, index: int, key: str) -> dict:
    tensors = json.loads(json.dumps(TENSORS))
    del tensors[kind][index][key]
    return tensors


def with_extra(kind: str, index: int, key: str) -> dict:
    tensors = json.loads(json.dumps(TENSORS))
    tensors[kind][index][key] = True
    return tensors


def write(
    repository: Path,
    name: str,
    config: str,
    tensors: dict = TENSORS,
    max_batch_size: int = 0,
    extra: str = "pass",
    returns: str = "return config",
) -> None:
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(f'name: "{name}" {config}')
    text = MODEL_PY.format(tensors=json.dumps(tensors), max_batch_size=max_batch_size, extra=extra, returns=returns)
    (repository / name / "1" / "model.py").write_text(text)


# (model, config.pbtxt after the name, what model.py's auto_complete_config adds, the text Triton shows)
FAILURES = [
    (
        "input_missing_datatype",
        FULL_CONFIG,
        {"tensors": without("inputs", 0, "data_type")},
        "input 'INPUT0' in auto-complete-config function for model 'input_missing_datatype' is missing "
        "'data_type' property.",
    ),
    (
        "output_missing_dims",
        FULL_CONFIG,
        {"tensors": without("outputs", 1, "dims")},
        "output 'OUTPUT1' in auto-complete-config function for model 'output_missing_dims' is missing 'dims' property.",
    ),
    (
        "input_missing_name",
        FULL_CONFIG,
        {"tensors": without("inputs", 0, "name")},
        "input in auto-complete-config function for model 'input_missing_name' is missing 'name' property.",
    ),
    (
        "output_wrong_property",
        FULL_CONFIG,
        {"tensors": with_extra("outputs", 1, "optional")},
        "output 'OUTPUT1' in auto-complete-config function for model 'output_wrong_property' contains property "
        "other than 'name', 'data_type' and 'dims'.",
    ),
    (
        "conflicting_max_batch_size",
        "max_batch_size: 6 " + FULL_CONFIG,
        {"max_batch_size": 4},
        "configuration specified max_batch_size 6, but in auto-complete-config function for model "
        "'conflicting_max_batch_size' specified max_batch_size 4",
    ),
    (
        "input_mismatch_datatype",
        FULL_CONFIG.replace("TYPE_FP32", "TYPE_INT32", 2).replace("TYPE_INT32", "TYPE_FP32", 1),
        {},
        "unable to load model 'input_mismatch_datatype', configuration expects datatype TYPE_INT32 for input "
        "'INPUT1', model provides TYPE_FP32",
    ),
    (
        "output_mismatch_dims",
        FULL_CONFIG[: FULL_CONFIG.rindex("[4]")] + "[16] }]",
        {},
        "model 'output_mismatch_dims', tensor 'OUTPUT1': the model expects dims [4] but the model configuration "
        "specifies dims [16]",
    ),
    (
        "no_return",
        FULL_CONFIG,
        {"returns": "pass"},
        "auto_complete_config function in model 'no_return' must return a valid pb.ModelConfig object.",
    ),
    (
        "input_missing_dims",
        FULL_CONFIG,
        {"tensors": without("inputs", 1, "dims")},
        "input 'INPUT1' in auto-complete-config function for model 'input_missing_dims' is missing 'dims' property.",
    ),
    (
        "output_missing_datatype",
        FULL_CONFIG,
        {"tensors": without("outputs", 0, "data_type")},
        "output 'OUTPUT0' in auto-complete-config function for model 'output_missing_datatype' is missing "
        "'data_type' property.",
    ),
    (
        "output_missing_name",
        FULL_CONFIG,
        {"tensors": without("outputs", 0, "name")},
        "output in auto-complete-config function for model 'output_missing_name' is missing 'name' property.",
    ),
    (
        "input_mismatch_dims",
        FULL_CONFIG.replace('"INPUT1" data_type: TYPE_FP32 dims: [4]', '"INPUT1" data_type: TYPE_FP32 dims: [16]'),
        {},
        "model 'input_mismatch_dims', tensor 'INPUT1': the model expects dims [4] but the model configuration "
        "specifies dims [16]",
    ),
    (
        "input_wrong_property",
        FULL_CONFIG,
        {"tensors": with_extra("inputs", 1, "is_shape_tensor")},
        "input 'INPUT1' in auto-complete-config function for model 'input_wrong_property' contains property other "
        "than 'name', 'data_type', 'dims' and 'optional'.",
    ),
    (
        "output_mismatch_datatype",
        FULL_CONFIG.replace('TYPE_FP32 dims: [4] }, { name: "OUTPUT1"', 'TYPE_INT32 dims: [4] }, { name: "OUTPUT1"'),
        {},
        "unable to load model 'output_mismatch_datatype', configuration expects datatype TYPE_INT32 for output "
        "'OUTPUT0', model provides TYPE_FP32",
    ),
    (
        "conflicting_scheduler_sequence",
        FULL_CONFIG + " sequence_batching: { }",
        {"max_batch_size": 4, "extra": "config.set_dynamic_batching()"},
        "Configuration specified scheduling_choice as 'sequence_batching', but auto-complete-config function for "
        "model 'conflicting_scheduler_sequence' tries to set scheduling_choice as 'dynamic_batching'",
    ),
    (
        "model_transaction_policy_invalid_args",
        FULL_CONFIG,
        {"max_batch_size": 4, "extra": 'config.set_model_transaction_policy({"invalid": "argument"})'},
        "model transaction property in auto-complete-config function for model "
        "'model_transaction_policy_invalid_args' contains property other than 'decoupled'",
    ),
    (
        "model_transaction_policy_mismatch",
        "model_transaction_policy { decoupled: false } " + FULL_CONFIG,
        {"max_batch_size": 4, "extra": "config.set_model_transaction_policy(dict(decoupled=True))"},
        "trying to change decoupled property in auto-complete-config for model 'model_transaction_policy_mismatch', "
        "which is already set to 'False'",
    ),
]


def completed(name: str, fields: str, tensors: str = FULL_CONFIG) -> str:
    """Triton's expected config for Python model `name` on a host without GPUs."""
    return (
        f'name: "{name}" version_policy {{ latest {{ num_versions: 1 }} }} {tensors} {fields} '
        f'instance_group {{ name: "{name}" count: 1 kind: KIND_CPU }} default_model_filename: "model.py" '
        "optimization { input_pinned_memory { enable: true } output_pinned_memory { enable: true } } "
        'backend: "python"'
    )


DECOUPLED = "config.set_model_transaction_policy(dict(decoupled=True))"
INPUT = '{{ name: "{}" data_type: TYPE_FP32 dims: [4] }}'
OUTPUT = INPUT
OUTPUTS = (
    'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [4] }]'
)

# (model, config.pbtxt after the name, what model.py's auto_complete_config does, Triton's
# expected config). The first is the case of issue #36: OUTPUT1 names its dims but no
# datatype, OUTPUT0 the reverse.
SUCCESSES = [
    (
        "incomplete_output",
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 }, { name: "OUTPUT1" dims: [4] }]',
        {},
        completed("incomplete_output", ""),
    ),
    (
        "unknown_input",
        f"input [{INPUT.format('INPUT0')}, {INPUT.format('INPUT_UNKNOWN')}] {OUTPUTS}",
        {},
        completed(
            "unknown_input",
            "",
            f"input [{INPUT.format('INPUT0')}, {INPUT.format('INPUT_UNKNOWN')}, {INPUT.format('INPUT1')}] {OUTPUTS}",
        ),
    ),
    (
        "unknown_output",
        "input ["
        + INPUT.format("INPUT0")
        + ", "
        + INPUT.format("INPUT1")
        + "] output ["
        + OUTPUT.format("OUTPUT_UNKNOWN")
        + ", "
        + OUTPUT.format("OUTPUT1")
        + "]",
        {},
        completed(
            "unknown_output",
            "",
            "input ["
            + INPUT.format("INPUT0")
            + ", "
            + INPUT.format("INPUT1")
            + "] output ["
            + OUTPUT.format("OUTPUT_UNKNOWN")
            + ", "
            + OUTPUT.format("OUTPUT1")
            + ", "
            + OUTPUT.format("OUTPUT0")
            + "]",
        ),
    ),
    (
        "empty_config",
        "",
        {},
        completed("empty_config", ""),
    ),
    (
        "incomplete_input",
        "input [" + INPUT.format("INPUT1") + "]",
        {"tensors": {"inputs": TENSORS["inputs"][:1], "outputs": TENSORS["outputs"]}},
        completed(
            "incomplete_input", "", "input [" + INPUT.format("INPUT1") + ", " + INPUT.format("INPUT0") + "] " + OUTPUTS
        ),
    ),
    (
        "optional_input",
        "input [" + INPUT.format("INPUT1") + "]",
        {"tensors": {"inputs": [{**TENSORS["inputs"][0], "optional": True}], "outputs": TENSORS["outputs"]}},
        completed(
            "optional_input",
            "",
            "input ["
            + INPUT.format("INPUT1")
            + ', { name: "INPUT0" data_type: TYPE_FP32 dims: [4] optional: true }] '
            + OUTPUTS,
        ),
    ),
    (
        "dynamic_batching",
        FULL_CONFIG,
        {"max_batch_size": 4, "extra": "config.set_dynamic_batching()"},
        completed("dynamic_batching", "max_batch_size: 4 dynamic_batching { preferred_batch_size: 4 }"),
    ),
    (
        "dynamic_batching_no_op",
        "max_batch_size: 4 " + FULL_CONFIG + " dynamic_batching: { preferred_batch_size: [4] }",
        {"max_batch_size": 4, "extra": "config.set_dynamic_batching()"},
        completed("dynamic_batching_no_op", "max_batch_size: 4 dynamic_batching { preferred_batch_size: 4 }"),
    ),
    (
        "model_transaction_policy",
        FULL_CONFIG,
        {"max_batch_size": 4, "extra": DECOUPLED},
        completed("model_transaction_policy", "max_batch_size: 4 model_transaction_policy { decoupled: true }"),
    ),
    (
        "model_transaction_policy_no_op",
        "model_transaction_policy { decoupled: true } " + FULL_CONFIG,
        {"max_batch_size": 4, "extra": DECOUPLED},
        completed("model_transaction_policy_no_op", "max_batch_size: 4 model_transaction_policy { decoupled: true }"),
    ),
    (
        "model_transaction_policy_decoupled_false",
        FULL_CONFIG,
        {"max_batch_size": 4, "extra": "config.set_model_transaction_policy(dict(decoupled=False))"},
        completed("model_transaction_policy_decoupled_false", "max_batch_size: 4 model_transaction_policy { }"),
    ),
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    repository = tmp_path_factory.mktemp("python_autofill")
    for name, config, model, _ in SUCCESSES + FAILURES:
        write(repository, name, config, **model)
    with ServerProcess(repository, "--model-control-mode", "explicit", "--allow-metrics", "false") as server:
        yield grpcclient.InferenceServerClient(server.grpc_url)


@pytest.mark.skipif(bool(gpu_ids()), reason="the expected configs are those of a host without GPUs")
@pytest.mark.parametrize("name,config,model,expected", SUCCESSES, ids=[c[0] for c in SUCCESSES])
def test_completed_config_equals_tritons(client, name, config, model, expected):
    client.load_model(name)
    loaded = client.get_model_config(name).config
    assert text_format.MessageToString(loaded) == text_format.MessageToString(
        text_format.Parse(expected, mc.ModelConfig())
    )


@pytest.mark.parametrize("name,config,model,expected", FAILURES, ids=[c[0] for c in FAILURES])
def test_what_triton_refuses_fails_with_its_message(client, name, config, model, expected):
    with pytest.raises(InferenceServerException) as info:
        client.load_model(name)
    assert expected in str(info.value.message())
