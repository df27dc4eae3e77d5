"""Triton's invalid ensemble configs that need no step model (qa/L0_model_config/
autofill_noplatform/ensemble): each is refused at load with Triton's message, before naiad
looks for a version folder or a step model.

Our own copies of the cases: the field values and expected messages are Triton's facts,
written here as one line each; `<IMAGE_IO>` stands for the tensors several cases share.
"""

from __future__ import annotations

import pytest
import tritonclient.http as httpclient
from triton_servers import explicit_server, load_error

SHARED = {
    "<IMAGE_IO>": 'input [{name: "data" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [1, 28, 28]}] '
    'output [{name: "prob" data_type: TYPE_FP32 dims: [10, 1, 1]}]',
}

# Two of Triton's configs name the model other than their directory; the message names the
# config's name, which Triton checks before the directory's.
CONFIG_NAMES = {"ensemble_scheduling_no_set": "ensemble_scheduling_not_set", "model_warm_up_set": "model_warmup_set"}

# (model directory, config without name and platform, the text Triton's log must show)
CASES = [
    (
        "no_input_map",
        'max_batch_size: 8 ensemble_scheduling {step [{model_name: "model_a" model_version: -1 input_map {key: "model_a_input" value: "data"} output_map {key: "model_a_output" value: "temp_1"}}, {model_name: "model_b" model_version: -1 output_map {key: "model_b_output" value: "temp_2"}}, {model_name: "model_c" model_version: -1 input_map {key: "model_c_input" value: "temp_2"} output_map {key: "model_c_output" value: "prob"}}]} <IMAGE_IO>',
        "must specify 'input_map' in step 1 of ensemble 'no_input_map'",
    ),
    (
        "output_to_tensor_overmapped",
        'max_batch_size: 2 ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_4"}}, {model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_1"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output1" value: "temp_tensor_2"} output_map {key: "output2" value: "temp_tensor_2"} output_map {key: "output3" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "input1" value: "temp_tensor_1"} input_map {key: "input2" value: "temp_tensor_2"} input_map {key: "input3" value: "temp_tensor_3"} input_map {key: "input4" value: "temp_tensor_4"} output_map {key: "output" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]',
        "ensemble tensor 'temp_tensor_2' can appear in an output map only once for ensemble 'output_to_tensor_overmapped'",
    ),
    (
        "redundant_tensor_as_input",
        'max_batch_size: 2 ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_4"}}, {model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "temp_tensor_5"} output_map {key: "output" value: "temp_tensor_6"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "input" value: "temp_tensor_4"} output_map {key: "output1" value: "temp_tensor_1"} output_map {key: "output2" value: "temp_tensor_2"} output_map {key: "output3" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "input1" value: "temp_tensor_1"} input_map {key: "input2" value: "temp_tensor_2"} input_map {key: "input3" value: "temp_tensor_3"} input_map {key: "input4" value: "temp_tensor_4"} output_map {key: "output" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]',
        "ensemble tensor 'temp_tensor_6' is unused in ensemble 'redundant_tensor_as_input'",
    ),
    (
        "redundant_tensor_as_output",
        'max_batch_size: 2 ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_1"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "input" value: "temp_tensor_1"} output_map {key: "output1" value: "prob"} output_map {key: "output2" value: "prob_2"} output_map {key: "output3" value: "temp_tensor_2"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}, {name: "prob_2" data_type: TYPE_FP32 dims: [16]}]',
        "ensemble tensor 'temp_tensor_2' is unused in ensemble 'redundant_tensor_as_output'",
    ),
    (
        "tensor_to_input_overmapped",
        'max_batch_size: 2 ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_4"}}, {model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "temp_tensor_4"} output_map {key: "output" value: "temp_tensor_5"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output1" value: "temp_tensor_1"} output_map {key: "output2" value: "temp_tensor_2"} output_map {key: "output3" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "input1" value: "temp_tensor_1"} input_map {key: "input2" value: "temp_tensor_2"} input_map {key: "input3" value: "temp_tensor_3"} input_map {key: "input4" value: "temp_tensor_5"} input_map {key: "input4" value: "temp_tensor_4"} output_map {key: "output" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]',
        "ensemble tensor 'temp_tensor_5' is unused in ensemble 'tensor_to_input_overmapped'",
    ),
    (
        "unreachable_input",
        'max_batch_size: 2 ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_4"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output1" value: "temp_tensor_1"} output_map {key: "output2" value: "temp_tensor_2"} output_map {key: "output3" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "input1" value: "temp_tensor_1"} input_map {key: "input2" value: "temp_tensor_2"} input_map {key: "input3" value: "temp_tensor_3"} input_map {key: "input4" value: "temp_tensor_4"} output_map {key: "output" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}, {name: "data_2" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]',
        "ensemble input 'data_2' for ensemble unreachable_input' is not used",
    ),
    (
        "unreachable_output",
        'max_batch_size: 2 ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_4"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output1" value: "temp_tensor_1"} output_map {key: "output2" value: "temp_tensor_2"} output_map {key: "output3" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "input1" value: "temp_tensor_1"} input_map {key: "input2" value: "temp_tensor_2"} input_map {key: "input3" value: "temp_tensor_3"} input_map {key: "input4" value: "temp_tensor_4"} output_map {key: "output" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}, {name: "prob_2" data_type: TYPE_FP32 dims: [16]}]',
        "ensemble output 'prob_2' for ensemble unreachable_output' is not used",
    ),
    (
        "unreachable_output_2",
        'max_batch_size: 2 ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_4"}}, {model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "prob_2"} output_map {key: "output" value: "prob_2"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output1" value: "temp_tensor_1"} output_map {key: "output2" value: "temp_tensor_2"} output_map {key: "output3" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "input1" value: "temp_tensor_1"} input_map {key: "input2" value: "temp_tensor_2"} input_map {key: "input3" value: "temp_tensor_3"} input_map {key: "input4" value: "temp_tensor_4"} output_map {key: "output" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}, {name: "prob_2" data_type: TYPE_FP32 dims: [16]}]',
        "output 'prob_2' for ensemble 'unreachable_output_2' is not written",
    ),
    (
        "unreachable_output_3",
        'max_batch_size: 2 ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "temp_tensor_4"}}, {model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "input" value: "not_written_tensor"} output_map {key: "output" value: "prob_2"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output1" value: "temp_tensor_1"} output_map {key: "output2" value: "temp_tensor_2"} output_map {key: "output3" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "input1" value: "temp_tensor_1"} input_map {key: "input2" value: "temp_tensor_2"} input_map {key: "input3" value: "temp_tensor_3"} input_map {key: "input4" value: "temp_tensor_4"} output_map {key: "output" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}, {name: "prob_2" data_type: TYPE_FP32 dims: [16]}]',
        "output 'prob_2' for ensemble 'unreachable_output_3' is not written: at least one of its depending tensors, 'not_written_tensor', is not connected",
    ),
    (
        "no_step",
        "max_batch_size: 8 ensemble_scheduling {step []} <IMAGE_IO>",
        "must specify 'step' for ensemble 'no_step'",
    ),
    (
        "no_step_2",
        "max_batch_size: 8 ensemble_scheduling {} <IMAGE_IO>",
        "must specify 'step' for ensemble 'no_step_2'",
    ),
    (
        "no_model_name",
        'max_batch_size: 8 ensemble_scheduling {step [{model_name: "model_a" model_version: -1 input_map {key: "model_a_input" value: "data"} output_map {key: "model_a_output" value: "temp_1"}}, {input_map {key: "model_b_input" value: "temp_1"} output_map {key: "model_b_output" value: "temp_2"}}, {model_name: "model_c" model_version: -1 input_map {key: "model_c_input" value: "temp_2"} output_map {key: "model_c_output" value: "prob"}}]} <IMAGE_IO>',
        "must specify 'model_name' in step 1 of ensemble 'no_model_name'",
    ),
    (
        "no_output_map",
        'max_batch_size: 8 ensemble_scheduling {step [{model_name: "model_a" model_version: -1 input_map {key: "model_a_input" value: "data"} output_map {key: "model_a_output" value: "temp_1"}}, {model_name: "model_b" model_version: -1 input_map {key: "model_b_input" value: "temp_1"}}, {model_name: "model_c" model_version: -1 input_map {key: "model_c_input" value: "temp_2"} output_map {key: "model_c_output" value: "prob"}}]} <IMAGE_IO>',
        "must specify 'output_map' in step 1 of ensemble 'no_output_map'",
    ),
    (
        "instance_group_set",
        'max_batch_size: 8 ensemble_scheduling {step [{model_name: "model_a" model_version: -1 input_map {key: "model_a_input" value: "data"} output_map {key: "model_a_output" value: "prob"}}]} <IMAGE_IO> instance_group [{kind: KIND_GPU gpus: [42]}]',
        "instance group should not be specified for ensemble 'instance_group_set'",
    ),
    (
        "optimization_set",
        'max_batch_size: 8 ensemble_scheduling {step [{model_name: "model_a" model_version: -1 input_map {key: "model_a_input" value: "data"} output_map {key: "model_a_output" value: "prob"}}]} <IMAGE_IO> optimization {priority: PRIORITY_MAX}',
        "optimization should not be specified for ensemble 'optimization_set'",
    ),
    (
        "model_warm_up_set",
        'max_batch_size: 8 ensemble_scheduling {step [{model_name: "model_a" model_version: -1 input_map {key: "model_a_input" value: "data"} output_map {key: "model_a_output" value: "prob"}}]} <IMAGE_IO> model_warmup [{}]',
        "model_warmup can not be specified for ensemble 'model_warmup_set'",
    ),
    (
        "ensemble_scheduling_no_set",
        "max_batch_size: 8 <IMAGE_IO>",
        "ensemble scheduling must be set for ensemble ensemble_scheduling_not_set whose platform is ensemble",
    ),
    (
        "has_backend",
        'max_batch_size: 8 backend: "onnxruntime" <IMAGE_IO>',
        "Ensemble model 'has_backend' must have platform type 'ensemble' and empty backend type",
    ),
]


def config_text(directory: str, fragment: str) -> str:
    for key, value in SHARED.items():
        fragment = fragment.replace(key, value)
    return f'name: "{CONFIG_NAMES.get(directory, directory)}"\nplatform: "ensemble"\n{fragment}\n'


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, str]:
    """Every case loaded once through one server: the message each load failed with."""
    repository = tmp_path_factory.mktemp("invalid_ensembles")
    for name, fragment, _ in CASES:
        (repository / name).mkdir()
        (repository / name / "config.pbtxt").write_text(config_text(name, fragment))
    with explicit_server(repository) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        messages = {name: load_error(client, name) for name, _, _ in CASES}
        assert client.is_server_live()
    return messages


@pytest.mark.parametrize("name,fragment,expected", CASES, ids=[c[0] for c in CASES])
def test_invalid_ensemble_is_refused_with_tritons_message(refusals, name, fragment, expected):
    assert expected in refusals[name]
