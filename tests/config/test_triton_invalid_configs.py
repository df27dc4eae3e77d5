"""Triton's invalid model configs (qa/L0_model_config/noautofill_platform): each is refused
at load with Triton's message, before naiad looks for a version folder or model file.

Our own copies of the cases: the field values and expected messages are Triton's facts,
written here as one line each; `<...>` stands for the tensors several cases share. As in
Triton's test, auto-complete is off and only the cases whose check Triton defers to model
creation (instance groups) get a `1/` folder.
"""

from __future__ import annotations

import pytest
import tritonclient.http as httpclient
from triton_servers import explicit_server, load_error

from naiad.testing import gpu_ids

SHARED = {
    "<VAR_IN>": 'input [{name: "INPUT" data_type: TYPE_INT32 dims: [-1]}] '
    'output [{name: "OUTPUT" data_type: TYPE_INT32 dims: [1]}]',
    "<VAR_IO>": 'input [{name: "INPUT" data_type: TYPE_INT32 dims: [-1]}] '
    'output [{name: "OUTPUT" data_type: TYPE_INT32 dims: [-1]}]',
    "<INT_IO>": 'input [{name: "INPUT" data_type: TYPE_INT32 dims: [1]}] '
    'output [{name: "OUTPUT" data_type: TYPE_INT32 dims: [1]}]',
    "<IMAGE_IO>": 'input [{name: "data" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [1, 28, 28]}] '
    'output [{name: "prob" data_type: TYPE_FP32 dims: [10, 1, 1]}]',
    "<FT>": "int32_false_true: [0, 1]",
}

# (model, config without name and platform, the text Triton's log must show)
CASES = [
    (
        "batch_input_less_source0",
        '<VAR_IN> batch_input [{kind: BATCH_ELEMENT_COUNT target_name: "BATCH_INPUT" data_type: TYPE_FP32}]',
        "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 0",
    ),
    (
        "batch_input_less_source1",
        '<VAR_IN> batch_input [{kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "BATCH_INPUT" data_type: TYPE_FP32}]',
        "batch input kind 'BATCH_ACCUMULATED_ELEMENT_COUNT' expects 1 source input, got 0",
    ),
    (
        "batch_input_less_source2",
        '<VAR_IN> batch_input [{kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "BATCH_INPUT" data_type: TYPE_FP32}]',
        "batch input kind 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO' expects 1 source input, got 0",
    ),
    (
        "batch_input_less_source3",
        '<VAR_IN> batch_input [{kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "BATCH_INPUT" data_type: TYPE_FP32}]',
        "batch input kind 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE' expects 1 source input, got 0",
    ),
    (
        "batch_input_many_source0",
        '<VAR_IN> batch_input [{kind: BATCH_ELEMENT_COUNT target_name: "BATCH_AND_SIZE_INPUT" data_type: TYPE_FP32 source_input: ["INPUT", "INPUT"]}]',
        "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 2",
    ),
    (
        "batch_input_many_source1",
        '<VAR_IN> batch_input [{kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "BATCH_AND_SIZE_INPUT" data_type: TYPE_FP32 source_input: ["INPUT", "INPUT"]}]',
        "batch input kind 'BATCH_ACCUMULATED_ELEMENT_COUNT' expects 1 source input, got 2",
    ),
    (
        "batch_input_many_source2",
        '<VAR_IN> batch_input [{kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "BATCH_AND_SIZE_INPUT" data_type: TYPE_FP32 source_input: ["INPUT", "INPUT"]}]',
        "batch input kind 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO' expects 1 source input, got 2",
    ),
    (
        "batch_input_many_source3",
        '<VAR_IN> batch_input [{kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "BATCH_AND_SIZE_INPUT" data_type: TYPE_FP32 source_input: ["INPUT", "INPUT"]}]',
        "batch input kind 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE' expects 1 source input, got 2",
    ),
    (
        "batch_input_unknown_source",
        '<VAR_IN> batch_input [{kind: BATCH_ELEMENT_COUNT target_name: "BATCH_INPUT" data_type: TYPE_FP32 source_input: "UNKNOWN_INPUT"}]',
        "unknown source input name 'UNKNOWN_INPUT'",
    ),
    (
        "batch_output_duplicated_target",
        '<VAR_IO> batch_output [{target_name: ["OUTPUT", "OUTPUT"] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT"}]',
        "target output name 'OUTPUT' can only be specified once",
    ),
    (
        "batch_output_less_source",
        '<VAR_IO> batch_output [{target_name: "OUTPUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE}]',
        "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 0",
    ),
    (
        "batch_output_many_source",
        '<VAR_IO> batch_output [{target_name: "OUTPUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: ["INPUT", "INPUT"]}]',
        "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 2",
    ),
    (
        "batch_output_unknown_source",
        '<VAR_IO> batch_output [{target_name: "OUTPUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "UNKNOWN_INPUT"}]',
        "unknown source input name 'UNKNOWN_INPUT'",
    ),
    (
        "batch_output_unknown_target",
        '<VAR_IO> batch_output [{target_name: "UNKNOWN_OUTPUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT"}]',
        "unknown target output name 'UNKNOWN_OUTPUT'",
    ),
    (
        "control_kind_end_multiple",
        'max_batch_size: 8 sequence_batching {control_input [{name: "START" control [{kind: CONTROL_SEQUENCE_START <FT>}]}, {name: "READY" control [{kind: CONTROL_SEQUENCE_READY <FT>}]}, {name: "END0" control [{kind: CONTROL_SEQUENCE_END <FT>}]}, {name: "END1" control [{kind: CONTROL_SEQUENCE_END <FT>}]}]} <INT_IO>',
        "sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for control_kind_end_multiple",
    ),
    (
        "control_kind_ready_multiple",
        'max_batch_size: 8 sequence_batching {control_input [{name: "START" control [{kind: CONTROL_SEQUENCE_START <FT>}]}, {name: "READY0" control [{kind: CONTROL_SEQUENCE_READY <FT>}]}, {name: "READY1" control [{kind: CONTROL_SEQUENCE_READY <FT>}]}]} <INT_IO>',
        "sequence batching specifies multiple CONTROL_SEQUENCE_READY tensors for control_kind_ready_multiple",
    ),
    (
        "control_kind_start_multiple",
        'max_batch_size: 8 sequence_batching {control_input [{name: "START" control [{kind: CONTROL_SEQUENCE_START <FT>}]}, {name: "READY" control [{kind: CONTROL_SEQUENCE_START <FT>}]}]} <INT_IO>',
        "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for control_kind_start_multiple",
    ),
    (
        "control_tensor_multiple",
        'max_batch_size: 8 sequence_batching {control_input [{name: "START" control [{kind: CONTROL_SEQUENCE_START <FT>}]}, {name: "START" control [{kind: CONTROL_SEQUENCE_READY <FT>}]}]} <INT_IO>',
        "sequence batching control tensor 'START' is specified for multiple control kinds for control_tensor_multiple",
    ),
    (
        "control_tensor_no_value",
        'max_batch_size: 8 sequence_batching {control_input [{name: "START" control [{kind: CONTROL_SEQUENCE_START <FT>}]}, {name: "READY" control [{kind: CONTROL_SEQUENCE_READY}]}]} <INT_IO>',
        "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_READY for control_tensor_no_value",
    ),
    (
        "default_priority_level0",
        "max_batch_size: 8 dynamic_batching {priority_levels: 3} <INT_IO>",
        "default priority level must be in range [1, 3] for default_priority_level0",
    ),
    (
        "default_priority_level1",
        "max_batch_size: 8 dynamic_batching {priority_levels: 3 default_priority_level: 5} <INT_IO>",
        "default priority level must be in range [1, 3] for default_priority_level1",
    ),
    (
        "ensemble_scheduling_set",
        'max_batch_size: 8 ensemble_scheduling {step [{model_name: "model_a" model_version: -1 input_map {key: "model_a_input" value: "data"} output_map {key: "model_a_output" value: "prob"}}]} <IMAGE_IO> instance_group [{kind: KIND_GPU gpus: [42]}]',
        "ensemble scheduling cannot be set for model 'ensemble_scheduling_set' whose platform is not ensemble",
    ),
    (
        "invalid_cpu",
        "max_batch_size: 8 <IMAGE_IO> instance_group [{kind: KIND_CPU gpus: [0]}]",
        "instance group invalid_cpu_0 of model invalid_cpu has kind KIND_CPU but specifies one or more GPU",
    ),
    (
        "invalid_gpu",
        "max_batch_size: 8 <IMAGE_IO> instance_group [{kind: KIND_GPU gpus: [42]}]",
        "instance group invalid_gpu_0 of model invalid_gpu specifies invalid or unsupported gpu id 42. GPUs with at least the minimum required CUDA compute compatibility",
    ),
    (
        "missing_datatype",
        'max_batch_size: 4 input [{name: "input" dims: [2, -1]}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' must specify 'data_type'",
    ),
    (
        "negative_gpu",
        "max_batch_size: 1 <IMAGE_IO> instance_group [{gpus: [0]}] instance_group [{kind: KIND_GPU gpus: [-1]}]",
        "instance group negative_gpu_1 of model negative_gpu specifies invalid or unsupported gpu id -1. GPUs with at least the minimum required CUDA compute compatibility",
    ),
    (
        "negative_max_batch_size",
        "max_batch_size: -2 <IMAGE_IO>",
        "'max_batch_size' must be non-negative value for negative_max_batch_size",
    ),
    (
        "preserve_ordering0",
        "max_batch_size: 8 dynamic_batching {preserve_ordering: true priority_levels: 3 default_priority_level: 2 priority_queue_policy {key: 1 value: {}}} <INT_IO>",
        "Only one priority level is allowed when 'preserve_ordering' is true for preserve_ordering0",
    ),
    (
        "preserve_ordering1",
        "max_batch_size: 8 dynamic_batching {preserve_ordering: true default_queue_policy {timeout_action: DELAY default_timeout_microseconds: 1000}} <INT_IO>",
        "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for preserve_ordering1",
    ),
    (
        "preserve_ordering2",
        "max_batch_size: 8 dynamic_batching {preserve_ordering: true priority_levels: 1 default_priority_level: 1 priority_queue_policy {key: 1 value: {timeout_action: DELAY default_timeout_microseconds: 1000}}} <INT_IO>",
        "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for preserve_ordering2",
    ),
    (
        "priority_level0",
        "max_batch_size: 8 dynamic_batching {priority_levels: 3 default_priority_level: 2 priority_queue_policy {key: 0 value: {}}} <INT_IO>",
        "priority queue policy must have priority level in range [1, 3] for priority_level0",
    ),
    (
        "priority_level1",
        "max_batch_size: 8 dynamic_batching {priority_levels: 3 default_priority_level: 2 priority_queue_policy {key: 4 value: {}}} <INT_IO>",
        "priority queue policy must have priority level in range [1, 3] for priority_level1",
    ),
    (
        "reshape_elementcount0",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [1, 3, 2] reshape {shape: [5]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' has different size for dims and reshape for reshape_elementcount0",
    ),
    (
        "reshape_elementcount1",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [15] reshape {shape: [2, 1, 5]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' has different size for dims and reshape for reshape_elementcount1",
    ),
    (
        "reshape_elementcount2",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [1, 3, 2] reshape {shape: [3]}}]',
        "model output 'output' has different size for dims and reshape for reshape_elementcount2",
    ),
    (
        "reshape_elementcount3",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [15] reshape {shape: [3, 2, 5]}}]',
        "model output 'output' has different size for dims and reshape for reshape_elementcount3",
    ),
    (
        "reshape_nobatch_empty0",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [1] reshape {shape: []}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' cannot have empty reshape for non-batching model as scalar tensors are not supported for reshape_nobatch_empty0",
    ),
    (
        "reshape_nobatch_empty1",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [1] reshape {shape: []}}]',
        "model output 'output' cannot have empty reshape for non-batching model as scalar tensors are not supported for reshape_nobatch_empty1",
    ),
    (
        "reshape_nobatch_variable0",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, 2]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' has different size for dims and reshape for reshape_nobatch_variable0",
    ),
    (
        "reshape_nobatch_variable1",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, 2]}}]',
        "model output 'output' has different size for dims and reshape for reshape_nobatch_variable1",
    ),
    (
        "reshape_nobatch_variable2",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, -1, 2]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' has different size for dims and reshape for reshape_nobatch_variable2",
    ),
    (
        "reshape_nobatch_variable3",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [1, -1, 2]}}]',
        "model output 'output' has different size for dims and reshape for reshape_nobatch_variable3",
    ),
    (
        "reshape_nobatch_variable4",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, -1, -1]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' has different number of variable-size dimensions for dims and reshape for reshape_nobatch_variable4",
    ),
    (
        "reshape_nobatch_variable5",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, -1, -1]}}]',
        "model output 'output' has different number of variable-size dimensions for dims and reshape for reshape_nobatch_variable5",
    ),
    (
        "reshape_nobatch_zerodims0",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [2, 2] reshape {shape: [0]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension for reshape_nobatch_zerodims0",
    ),
    (
        "reshape_nobatch_zerodims1",
        'max_batch_size: 0 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [2, 2] reshape {shape: [0]}}]',
        "model output 'output' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension for reshape_nobatch_zerodims1",
    ),
    (
        "reshape_variable0",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, 2]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' has different size for dims and reshape for reshape_variable0",
    ),
    (
        "reshape_variable1",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, 2]}}]',
        "model output 'output' has different size for dims and reshape for reshape_variable1",
    ),
    (
        "reshape_variable2",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, -1, 2]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' has different size for dims and reshape for reshape_variable2",
    ),
    (
        "reshape_variable3",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [1, -1, 2]}}]',
        "model output 'output' has different size for dims and reshape for reshape_variable3",
    ),
    (
        "reshape_variable4",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, -1, -1]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' has different number of variable-size dimensions for dims and reshape for reshape_variable4",
    ),
    (
        "reshape_variable5",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [2, -1] reshape {shape: [2, -1, -1]}}]',
        "model output 'output' has different number of variable-size dimensions for dims and reshape for reshape_variable5",
    ),
    (
        "reshape_zerodims0",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [2, 2] reshape {shape: [0]}}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension for reshape_zerodims0",
    ),
    (
        "reshape_zerodims1",
        'max_batch_size: 4 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [2, 2] reshape {shape: [0]}}]',
        "model output 'output' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension for reshape_zerodims1",
    ),
    (
        "zerodims_input0",
        'max_batch_size: 8 input [{name: "input" data_type: TYPE_FP32 dims: [1, 0, 28]}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for zerodims_input0",
    ),
    (
        "zerodims_input1",
        'max_batch_size: 8 input [{name: "input" data_type: TYPE_FP32 dims: [0]}] output [{name: "output" data_type: TYPE_FP32 dims: [1]}]',
        "model input 'input' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for zerodims_input1",
    ),
    (
        "zerodims_output0",
        'max_batch_size: 8 input [{name: "input" data_type: TYPE_FP32 dims: [1, 28]}] output [{name: "output" data_type: TYPE_FP32 dims: [1, 1, 0]}]',
        "model output 'output' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for zerodims_output0",
    ),
    (
        "zerodims_output1",
        'max_batch_size: 8 input [{name: "input" data_type: TYPE_FP32 dims: [1]}] output [{name: "output" data_type: TYPE_FP32 dims: [0]}]',
        "model output 'output' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for zerodims_output1",
    ),
]

# Triton checks instance groups when it creates the model version, after it found one.
NEEDS_VERSION = {"invalid_cpu", "invalid_gpu", "negative_gpu"}

# Triton's QA runs on a GPU host; on a host without GPUs the KIND_AUTO group that lists
# GPU 0 becomes a CPU group first, and Triton refuses that group instead.
WITHOUT_GPUS = {
    "negative_gpu": "instance group negative_gpu_0 of model negative_gpu has kind KIND_CPU but specifies one or more GPUs"
}


def config_text(name: str, fragment: str) -> str:
    for key, value in SHARED.items():
        fragment = fragment.replace(key, value)
    return f'name: "{name}"\nplatform: "onnxruntime_onnx"\n{fragment}\n'


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, str]:
    """Every case loaded once through one server: the message each load failed with."""
    repository = tmp_path_factory.mktemp("invalid_configs")
    for name, fragment, _ in CASES:
        (repository / name).mkdir()
        (repository / name / "config.pbtxt").write_text(config_text(name, fragment))
        if name in NEEDS_VERSION:
            (repository / name / "1").mkdir()
    with explicit_server(repository, "--disable-auto-complete-config") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        messages = {name: load_error(client, name) for name, _, _ in CASES}
        assert client.is_server_live()  # every refusal left the server serving
    return messages


def test_the_table_holds_every_case():
    assert len({name for name, _, _ in CASES}) == 58


@pytest.mark.parametrize("name,fragment,expected", CASES, ids=[c[0] for c in CASES])
def test_invalid_config_is_refused_with_tritons_message(refusals, name, fragment, expected):
    if name in WITHOUT_GPUS and not gpu_ids():
        expected = WITHOUT_GPUS[name]
    assert expected in refusals[name]
