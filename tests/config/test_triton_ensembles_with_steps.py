"""Triton's invalid ensembles that need their step models (qa/L0_model_config/
autofill_noplatform/ensemble), our own copies, loaded through tritonclient: each is refused
with Triton's message (one of Triton's, where its test accepts either order).

The numpy test backend's identity stands in for Triton's identity steps. Triton's test gives
each case a repository of its own; here cases whose step models agree share one (one server
each), and the case that needs a step model to be missing has its own."""

from __future__ import annotations

import pytest
import tritonclient.http as httpclient
from triton_servers import explicit_server, load_error

# Triton's step models: (max_batch_size, how many inputs and outputs, data type, dims, extra).
STEPS = {
    "fp32_dim1_batch2": (2, 1, "TYPE_FP32", "[16]", ""),
    "fp32_dim1_batch4": (4, 1, "TYPE_FP32", "[16]", ""),
    "fp32_dim1_batch4_input4": (4, 4, "TYPE_FP32", "[16]", ""),
    "fp32_dim1_batch4_output3": (4, 3, "TYPE_FP32", "[16]", ""),
    "int32_dim1_batch4": (4, 1, "TYPE_INT32", "[16]", ""),
    "fp32_dim3_batch4": (4, 1, "TYPE_FP32", "[16, 16, 16]", ""),
    "simple": (8, 2, "TYPE_INT32", "[16]", "version_policy: { all {} }"),
    "int32_dim1_nobatch_output2": (0, 2, "TYPE_INT32", "[1]", ""),
}

# Triton's decoupled `repeat` backend: the numpy test backend's `repeat` answers the same way
# (one response per element of IN, with OUT and IDX).
REPEAT_INT32 = (
    'name: "repeat_int32" backend: "numpy" max_batch_size: 0 model_transaction_policy { decoupled: true } '
    'parameters { key: "op" value { string_value: "repeat" } } '
    'input [{ name: "IN" data_type: TYPE_INT32 dims: [-1] }, { name: "DELAY" data_type: TYPE_UINT32 dims: [-1] }, '
    '{ name: "WAIT" data_type: TYPE_UINT32 dims: [1] }] '
    'output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }, { name: "IDX" data_type: TYPE_UINT32 dims: [1] }]'
)


def step_config(name: str) -> str:
    if name == "repeat_int32":
        return REPEAT_INT32
    max_batch_size, count, data_type, dims, extra = STEPS[name]
    inputs = ", ".join(f'{{ name: "INPUT{i}" data_type: {data_type} dims: {dims} }}' for i in range(count))
    outputs = ", ".join(f'{{ name: "OUTPUT{i}" data_type: {data_type} dims: {dims} }}' for i in range(count))
    return (
        f'name: "{name}" backend: "numpy" max_batch_size: {max_batch_size} {extra} '
        'parameters { key: "op" value { string_value: "identity" } } instance_group [{ kind: KIND_CPU }] '
        f"input [{inputs}] output [{outputs}]"
    )


# The repeat step's maps and the ensemble inputs they read, shared by the decoupled cases.
REPEAT_MAPS = (
    'input_map { key: "IN" value: "IN" } input_map { key: "DELAY" value: "DELAY" } '
    'input_map { key: "WAIT" value: "WAIT" }'
)
ENSEMBLE_INPUTS = (
    'input [{ name: "IN" data_type: TYPE_INT32 dims: [-1] }, { name: "DELAY" data_type: TYPE_UINT32 dims: [-1] }, '
    '{ name: "WAIT" data_type: TYPE_UINT32 dims: [1] }]'
)

# (case and the ensemble it loads, its step models, its ensembles' configs without their
# names, the texts Triton's log may show)
CASES = [
    (
        "invalid_batch_size",
        ["fp32_dim1_batch2", "fp32_dim1_batch4"],
        {
            "invalid_batch_size": (
                'max_batch_size: 3 platform: "ensemble" ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" mo'
                'del_version: -1 input_map {key: "INPUT0" value: "data"} output_map {key: "OUTPUT0" value: "temp_tens'
                'or"}}, {model_name: "fp32_dim1_batch2" model_version: -1 input_map {key: "INPUT0" value: "temp_tenso'
                'r"} output_map {key: "OUTPUT0" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16'
                ']}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]'
            ),
        },
        [
            "ensemble invalid_batch_size allows maximum batch size 3, but it contains model fp32_dim1_batch2 which only allows maximum batch size to be 2"
        ],
    ),
    (
        "invalid_input_map",
        ["fp32_dim1_batch4", "fp32_dim1_batch4_input4", "fp32_dim1_batch4_output3"],
        {
            "invalid_input_map": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" mo'
                'del_version: -1 input_map {key: "INPUT0" value: "data"} output_map {key: "OUTPUT0" value: "temp_tens'
                'or_4"}}, {model_name: "fp32_dim1_batch4" model_version: -1 input_map {key: "INPUT0" value: "temp_ten'
                'sor_4"} output_map {key: "OUTPUT0" value: "temp_tensor_5"}}, {model_name: "fp32_dim1_batch4_output3"'
                ' model_version: -1 input_map {key: "INPUT0" value: "data"} input_map {key: "INPUT1" value: "data"} i'
                'nput_map {key: "INPUT2" value: "data"} output_map {key: "OUTPUT0" value: "temp_tensor_1"} output_map'
                ' {key: "OUTPUT1" value: "temp_tensor_2"} output_map {key: "OUTPUT2" value: "temp_tensor_3"}}, {model'
                '_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "INPUT0" value: "temp_tensor_1"} '
                'input_map {key: "INPUT1" value: "temp_tensor_2"} input_map {key: "INPUT2" value: "temp_tensor_3"} in'
                'put_map {key: "INPUT3" value: "temp_tensor_4"} input_map {key: "invalid_input" value: "temp_tensor_5'
                '"} output_map {key: "OUTPUT0" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]'
                '}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]'
            ),
        },
        [
            "in ensemble invalid_input_map, ensemble tensor temp_tensor_5 is mapping to non-existing input invalid_input in model fp32_dim1_batch4_input4"
        ],
    ),
    (
        "invalid_output_map",
        ["fp32_dim1_batch4", "fp32_dim1_batch4_input4", "fp32_dim1_batch4_output3"],
        {
            "invalid_output_map": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" mo'
                'del_version: -1 input_map {key: "INPUT0" value: "data"} output_map {key: "OUTPUT0" value: "temp_tens'
                'or_4"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "INPUT0" value: "'
                'data"} input_map {key: "INPUT1" value: "data"} input_map {key: "INPUT2" value: "data"} output_map {k'
                'ey: "OUTPUT0" value: "temp_tensor_1"} output_map {key: "invalid_output" value: "temp_tensor_2"}}, {m'
                'odel_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "INPUT0" value: "temp_tensor_'
                '1"} input_map {key: "INPUT1" value: "temp_tensor_2"} input_map {key: "INPUT2" value: "temp_tensor_1"'
                '} input_map {key: "INPUT3" value: "temp_tensor_4"} output_map {key: "OUTPUT0" value: "prob"}}]} inpu'
                't [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: '
                "[16]}]"
            ),
        },
        [
            "in ensemble invalid_output_map, ensemble tensor temp_tensor_2 is mapped from non-existing output invalid_output in model fp32_dim1_batch4_output3"
        ],
    ),
    (
        "unmapped_input",
        ["fp32_dim1_batch4", "fp32_dim1_batch4_input4", "fp32_dim1_batch4_output3"],
        {
            "unmapped_input": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "fp32_dim1_batch4_out'
                'put3" model_version: -1 input_map {key: "INPUT0" value: "data"} input_map {key: "INPUT1" value: "dat'
                'a"} input_map {key: "INPUT2" value: "data"} output_map {key: "OUTPUT0" value: "temp_tensor_2"} outpu'
                't_map {key: "OUTPUT1" value: "temp_tensor_3"} output_map {key: "OUTPUT2" value: "temp_tensor_4"}}, {'
                'model_name: "fp32_dim1_batch4_input4" model_version: -1 input_map {key: "INPUT1" value: "temp_tensor'
                '_2"} input_map {key: "INPUT2" value: "temp_tensor_3"} input_map {key: "INPUT3" value: "temp_tensor_4'
                '"} output_map {key: "OUTPUT0" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]'
                '}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]'
            ),
        },
        [
            "in ensemble unmapped_input, input INPUT0 in model fp32_dim1_batch4_input4 is not mapped to any ensemble tensors"
        ],
    ),
    (
        "inconsistent_data_type",
        ["fp32_dim1_batch2", "int32_dim1_batch4"],
        {
            "inconsistent_data_type": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "int32_dim1_batch4" m'
                'odel_version: -1 input_map {key: "INPUT0" value: "data"} output_map {key: "OUTPUT0" value: "temp_ten'
                'sor"}}, {model_name: "fp32_dim1_batch2" model_version: -1 input_map {key: "INPUT0" value: "temp_tens'
                'or"} output_map {key: "OUTPUT0" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [1'
                '6]}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]'
            ),
        },
        [
            "in ensemble inconsistent_data_type, ensemble tensor data: inconsistent data type: TYPE_FP32 is inferred from model inconsistent_data_type while TYPE_INT32 is inferred from model int32_dim1_batch4"
        ],
    ),
    (
        "inconsistent_shape",
        ["fp32_dim1_batch4", "fp32_dim3_batch4"],
        {
            "inconsistent_shape": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" mo'
                'del_version: -1 input_map {key: "INPUT0" value: "data"} output_map {key: "OUTPUT0" value: "temp_tens'
                'or"}}, {model_name: "fp32_dim3_batch4" model_version: -1 input_map {key: "INPUT0" value: "temp_tenso'
                'r"} output_map {key: "OUTPUT0" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16'
                ']}] output [{name: "prob" data_type: TYPE_FP32 dims: [16]}]'
            ),
        },
        [
            "in ensemble inconsistent_shape, ensemble tensor temp_tensor: inconsistent shape: [-1,16] is inferred from model fp32_dim1_batch4 while [-1,16,16,16] is inferred from model fp32_dim3_batch4",
            "in ensemble inconsistent_shape, ensemble tensor temp_tensor: inconsistent shape: [-1,16,16,16] is inferred from model fp32_dim3_batch4 while [-1,16] is inferred from model fp32_dim1_batch4",
        ],
    ),
    (
        "non_existing_model",
        ["fp32_dim1_batch4", "fp32_dim1_batch4_output3"],
        {
            "non_existing_model": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" mo'
                'del_version: -1 input_map {key: "INPUT0" value: "data"} output_map {key: "OUTPUT0" value: "temp_tens'
                'or_4"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "INPUT0" value: "'
                'data"} input_map {key: "INPUT1" value: "data"} input_map {key: "INPUT2" value: "data"} output_map {k'
                'ey: "OUTPUT0" value: "temp_tensor_1"} output_map {key: "OUTPUT1" value: "temp_tensor_2"} output_map '
                '{key: "OUTPUT2" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 i'
                'nput_map {key: "input1" value: "temp_tensor_1"} input_map {key: "input2" value: "temp_tensor_2"} inp'
                'ut_map {key: "input3" value: "temp_tensor_3"} input_map {key: "input4" value: "temp_tensor_4"} outpu'
                't_map {key: "output" value: "prob"}}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output'
                ' [{name: "prob" data_type: TYPE_FP32 dims: [16]}]'
            ),
        },
        ["ensemble non_existing_model contains models that are not available or ambiguous: fp32_dim1_batch4_input4"],
    ),
    (
        "self_circular_dependency",
        ["fp32_dim1_batch4", "fp32_dim1_batch4_input4", "fp32_dim1_batch4_output3"],
        {
            "self_circular_dependency": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "fp32_dim1_batch4" mo'
                'del_version: -1 input_map {key: "INPUT0" value: "data"} output_map {key: "OUTPUT0" value: "temp_tens'
                'or_4"}}, {model_name: "fp32_dim1_batch4_output3" model_version: -1 input_map {key: "INPUT0" value: "'
                'data"} input_map {key: "INPUT1" value: "data"} input_map {key: "INPUT2" value: "data"} output_map {k'
                'ey: "OUTPUT0" value: "temp_tensor_1"} output_map {key: "OUTPUT1" value: "temp_tensor_2"} output_map '
                '{key: "OUTPUT2" value: "temp_tensor_3"}}, {model_name: "fp32_dim1_batch4_input4" model_version: -1 i'
                'nput_map {key: "INPUT0" value: "temp_tensor_1"} input_map {key: "INPUT1" value: "temp_tensor_2"} inp'
                'ut_map {key: "INPUT2" value: "temp_tensor_3"} input_map {key: "INPUT3" value: "temp_tensor_4"} outpu'
                't_map {key: "OUTPUT0" value: "temp_tensor_5"}}, {model_name: "self_circular_dependency" model_versio'
                'n: -1 input_map {key: "data" value: "temp_tensor_5"} output_map {key: "prob" value: "prob"}}]} input'
                ' [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP32 dims: ['
                "16]}]"
            ),
        },
        [
            "circular dependency between ensembles: self_circular_dependency -> ... -> self_circular_dependency -> self_circular_dependency"
        ],
    ),
    (
        "circular_dependency",
        [],
        {
            "circular_dependency": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "circular_dependency_'
                '2" model_version: -1 input_map {key: "input" value: "data"} output_map {key: "output" value: "prob"}'
                '}]} input [{name: "data" data_type: TYPE_FP32 dims: [16]}] output [{name: "prob" data_type: TYPE_FP3'
                "2 dims: [16]}]"
            ),
            "circular_dependency_2": (
                'max_batch_size: 2 platform: "ensemble" ensemble_scheduling {step [{model_name: "circular_dependency"'
                ' model_version: -1 input_map {key: "data" value: "input"} output_map {key: "prob" value: "output"}}]'
                '} input [{name: "input" data_type: TYPE_FP32 dims: [16]}] output [{name: "output" data_type: TYPE_FP'
                "32 dims: [16]}]"
            ),
        },
        [
            "circular dependency between ensembles: circular_dependency -> ... -> circular_dependency_2 -> circular_dependency",
            "circular dependency between ensembles: circular_dependency_2 -> ... -> circular_dependency -> circular_dependency_2",
        ],
    ),
    (
        "no_required_version",
        ["simple"],
        {
            "no_required_version": (
                'platform: "ensemble" max_batch_size: 8 input [{name: "INPUT0" data_type: TYPE_INT32 dims: [16]}, {na'
                'me: "INPUT1" data_type: TYPE_INT32 dims: [16]}] output [{name: "OUTPUT0" data_type: TYPE_INT32 dims:'
                ' [16]}, {name: "OUTPUT1" data_type: TYPE_INT32 dims: [16]}] ensemble_scheduling {step [{model_name: '
                '"simple" model_version: 2 input_map {key: "INPUT0" value: "INPUT0"} input_map {key: "INPUT1" value: '
                '"INPUT1"} output_map {key: "OUTPUT0" value: "OUTPUT0"} output_map {key: "OUTPUT1" value: "OUTPUT1"}}'
                "]}"
            ),
        },
        ["ensemble 'no_required_version' depends on 'simple' whose required version 2 is not loaded"],
    ),
    (
        "no_required_version_2",
        ["simple"],
        {
            "no_required_version_2": (
                'platform: "ensemble" max_batch_size: 8 input [{name: "INPUT0" data_type: TYPE_INT32 dims: [16]}, {na'
                'me: "INPUT1" data_type: TYPE_INT32 dims: [16]}] output [{name: "OUTPUT0" data_type: TYPE_INT32 dims:'
                ' [16]}, {name: "OUTPUT1" data_type: TYPE_INT32 dims: [16]}] ensemble_scheduling {step [{model_name: '
                '"simple" model_version: -1 input_map {key: "INPUT0" value: "INPUT0"} input_map {key: "INPUT1" value:'
                ' "INPUT1"} output_map {key: "OUTPUT0" value: "temp0"} output_map {key: "OUTPUT1" value: "temp1"}}, {'
                'model_name: "simple" model_version: 2 input_map {key: "INPUT0" value: "temp0"} input_map {key: "INPU'
                'T1" value: "temp1"} output_map {key: "OUTPUT0" value: "OUTPUT0"} output_map {key: "OUTPUT1" value: "'
                'OUTPUT1"}}]}'
            ),
        },
        ["ensemble 'no_required_version_2' depends on 'simple' whose required version 2 is not loaded"],
    ),
    (
        "no_required_version_3",
        ["simple"],
        {
            "no_required_version_3": (
                'platform: "ensemble" max_batch_size: 8 input [{name: "INPUT0" data_type: TYPE_INT32 dims: [16]}, {na'
                'me: "INPUT1" data_type: TYPE_INT32 dims: [16]}] output [{name: "OUTPUT0" data_type: TYPE_INT32 dims:'
                ' [16]}, {name: "OUTPUT1" data_type: TYPE_INT32 dims: [16]}] ensemble_scheduling {step [{model_name: '
                '"simple" model_version: 2 input_map {key: "INPUT0" value: "INPUT0"} input_map {key: "INPUT1" value: '
                '"INPUT1"} output_map {key: "OUTPUT0" value: "temp0"} output_map {key: "OUTPUT1" value: "temp1"}}, {m'
                'odel_name: "simple" model_version: -1 input_map {key: "INPUT0" value: "temp0"} input_map {key: "INPU'
                'T1" value: "temp1"} output_map {key: "OUTPUT0" value: "OUTPUT0"} output_map {key: "OUTPUT1" value: "'
                'OUTPUT1"}}]}'
            ),
        },
        ["ensemble 'no_required_version_3' depends on 'simple' whose required version 2 is not loaded"],
    ),
    (
        "invalid_decoupled_branching",
        ["repeat_int32", "int32_dim1_nobatch_output2"],
        {
            "invalid_decoupled_branching": (
                'max_batch_size: 0 platform: "ensemble" ensemble_scheduling { step [{ model_name: "repeat_int32" '
                f'model_version: -1 {REPEAT_MAPS} output_map {{ key: "OUT" value: "repeat_1_out" }} }}, '
                f'{{ model_name: "repeat_int32" model_version: -1 {REPEAT_MAPS} '
                'output_map { key: "OUT" value: "repeat_2_out" } }, { model_name: "int32_dim1_nobatch_output2" '
                'model_version: -1 input_map { key: "INPUT0" value: "repeat_1_out" } input_map { key: "INPUT1" '
                'value: "repeat_2_out" } output_map { key: "OUTPUT0" value: "identity_0" } output_map { key: '
                '"OUTPUT1" value: "identity_1" } }, { model_name: "int32_dim1_nobatch_output2" model_version: -1 '
                'input_map { key: "INPUT0" value: "identity_0" } input_map { key: "INPUT1" value: "identity_1" } '
                f'output_map {{ key: "OUTPUT0" value: "OUT" }} }}] }} {ENSEMBLE_INPUTS} '
                'output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }]'
            ),
        },
        [
            "in ensemble invalid_decoupled_branching, step of model 'int32_dim1_nobatch_output2' receives inputs "
            "originated from different decoupled models"
        ],
    ),
    (
        "invalid_decoupled_branching_2",
        ["repeat_int32"],
        {
            "invalid_decoupled_branching_2": (
                'max_batch_size: 0 platform: "ensemble" ensemble_scheduling { step [{ model_name: "repeat_int32" '
                f'model_version: -1 {REPEAT_MAPS} output_map {{ key: "OUT" value: "OUT" }} }}, '
                f'{{ model_name: "repeat_int32" model_version: -1 {REPEAT_MAPS} '
                f'output_map {{ key: "IDX" value: "IDX" }} }}] }} {ENSEMBLE_INPUTS} '
                'output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }, { name: "IDX" data_type: TYPE_UINT32 dims: [1] }]'
            ),
        },
        [
            "in ensemble invalid_decoupled_branching_2, step of model 'invalid_decoupled_branching_2' receives "
            "inputs originated from different decoupled models"
        ],
    ),
]


# Which repository each case is loaded from.
REPOSITORIES = {
    "invalid_input_map": "three_steps",
    "invalid_output_map": "three_steps",
    "unmapped_input": "three_steps",
    "self_circular_dependency": "three_steps",
    "circular_dependency": "three_steps",
    "invalid_batch_size": "two_steps",
    "inconsistent_data_type": "two_steps",
    "inconsistent_shape": "two_steps",
    "non_existing_model": "no_input4",
    "no_required_version": "simple",
    "no_required_version_2": "simple",
    "no_required_version_3": "simple",
    "invalid_decoupled_branching": "decoupled",
    "invalid_decoupled_branching_2": "decoupled",
}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, str]:
    """Every case loaded once, each repository by one server: the message each load failed with."""
    messages: dict[str, str] = {}
    for repository_name in sorted(set(REPOSITORIES.values())):
        repository = tmp_path_factory.mktemp(repository_name)
        cases = [case for case in CASES if REPOSITORIES[case[0]] == repository_name]
        for name in sorted({step for _, steps, _, _ in cases for step in steps}):
            (repository / name / "1").mkdir(parents=True)
            (repository / name / "config.pbtxt").write_text(step_config(name))
        for _, _, ensembles, _ in cases:
            for name, config in ensembles.items():
                (repository / name / "1").mkdir(parents=True)
                (repository / name / "config.pbtxt").write_text(f'name: "{name}" {config}')
        with explicit_server(repository) as server:
            client = httpclient.InferenceServerClient(server.http_url)
            for case, _, _, _ in cases:
                messages[case] = load_error(client, case)
    return messages


def test_every_case_has_a_repository():
    assert sorted(REPOSITORIES) == sorted(case for case, _, _, _ in CASES)


@pytest.mark.parametrize("case,steps,ensembles,expected", CASES, ids=[c[0] for c in CASES])
def test_invalid_ensemble_is_refused_with_tritons_message(refusals, case, steps, ensembles, expected):
    assert any(text in refusals[case] for text in expected), refusals[case]
