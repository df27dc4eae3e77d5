"""Triton's ONNX auto-complete cases (qa/L0_model_config/autofill_noplatform/onnx and
autofill_noplatform_success/onnx), our own copies, through a real server and tritonclient:
the configs Triton completes read back over gRPC equal Triton's expected configs for a
host without GPUs, and the ones it refuses fail with Triton's message."""

from __future__ import annotations

from pathlib import Path

import onnx_models
import pytest
import tritonclient.grpc as grpcclient
from google.protobuf import text_format
from onnx import TensorProto, helper
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess, gpu_ids

pytestmark = pytest.mark.skipif(bool(gpu_ids()), reason="the expected configs are those of a host without GPUs")


def int32_to_int8(batching: bool = True) -> bytes:
    """Triton's onnx_int32_int8_int8 shape: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1,
    [batch, 16] (or [16]) INT32 in, INT8 out."""
    dims: list[object] = ["batch", 16] if batching else [16]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32, dims) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.INT8, dims) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = [
        helper.make_node("Add", ["INPUT0", "INPUT1"], ["SUM"]),
        helper.make_node("Sub", ["INPUT0", "INPUT1"], ["DIFFERENCE"]),
        helper.make_node("Cast", ["SUM"], ["OUTPUT0"], to=TensorProto.INT8),
        helper.make_node("Cast", ["DIFFERENCE"], ["OUTPUT1"], to=TensorProto.INT8),
    ]
    return onnx_models._model(helper.make_graph(nodes, "int32_int8", inputs, outputs))


INT_IO = (
    'input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [16] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [16] }] '
    'output [{ name: "OUTPUT0" data_type: TYPE_INT8 dims: [16] }, { name: "OUTPUT1" data_type: TYPE_INT8 dims: [16] }] '
)
COMPLETED = (
    'platform: "onnxruntime_onnx" version_policy { latest { num_versions: 1 } } '
    'default_model_filename: "model.onnx" backend: "onnxruntime" '
    "optimization { input_pinned_memory { enable: true } output_pinned_memory { enable: true } } "
)

# (model, model file, config.pbtxt or None for none, Triton's expected config on a CPU host)
SUCCESSES = [
    (
        "no_config",
        int32_to_int8(),
        None,
        f'name: "no_config" max_batch_size: 4 {INT_IO} {COMPLETED} dynamic_batching {{ preferred_batch_size: 4 }} '
        'instance_group { name: "no_config" count: 2 kind: KIND_CPU }',
    ),
    (
        "empty_config",
        int32_to_int8(),
        "",
        f'name: "empty_config" max_batch_size: 4 {INT_IO} {COMPLETED} dynamic_batching {{ preferred_batch_size: 4 }} '
        'instance_group { name: "empty_config" count: 2 kind: KIND_CPU }',
    ),
    (
        "no_config_no_batch",
        int32_to_int8(batching=False),
        "instance_group [{ kind: KIND_CPU }]",
        f'name: "no_config_no_batch" {INT_IO} {COMPLETED} '
        'instance_group { name: "no_config_no_batch_0" count: 2 kind: KIND_CPU }',
    ),
    (
        "cpu_instance",
        onnx_models.identity(TensorProto.FLOAT16, dims=("batch", "rows", "columns")),
        'name: "cpu_instance" platform: "onnxruntime_onnx" max_batch_size: 8 '
        "version_policy: { latest { num_versions: 1 }} "
        'input [{ name: "INPUT0" data_type: TYPE_FP16 dims: [-1, -1] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_FP16 dims: [-1, -1] }] '
        'instance_group { name: "cpu_instance" kind: KIND_CPU }',
        'name: "cpu_instance" max_batch_size: 8 '
        'input [{ name: "INPUT0" data_type: TYPE_FP16 dims: [-1, -1] }] '
        f'output [{{ name: "OUTPUT0" data_type: TYPE_FP16 dims: [-1, -1] }}] {COMPLETED} '
        'instance_group { name: "cpu_instance" count: 2 kind: KIND_CPU }',
    ),
]

TWO_IN = (
    'input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [16] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [16] }] '
)
TWO_OUT = (
    'output [{ name: "OUTPUT0" data_type: TYPE_INT8 dims: [16] }, { name: "OUTPUT1" data_type: TYPE_INT8 dims: [16] }]'
)

# (model, model file, config.pbtxt, the text Triton's log shows)
FAILURES = [
    (
        "bad_input_dims",
        int32_to_int8(),
        'max_batch_size: 1 input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [16, 1] }, '
        '{ name: "INPUT1" data_type: TYPE_INT32 dims: [16] }] ' + TWO_OUT,
        "model 'bad_input_dims', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,16]) but the model "
        "configuration specifies 3 dimensions (an initial batch dimension because max_batch_size > 0 followed by "
        "the explicit tensor shape, making complete shape [-1,16,1])",
    ),
    (
        "bad_output_dims",
        int32_to_int8(),
        "max_batch_size: 1 " + TWO_IN + 'output [{ name: "OUTPUT0" data_type: TYPE_INT8 dims: [16] }, '
        '{ name: "OUTPUT1" data_type: TYPE_INT8 dims: [1] }]',
        "model 'bad_output_dims', tensor 'OUTPUT1': the model expects 2 dimensions (shape [-1,16]) but the model "
        "configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 followed by "
        "the explicit tensor shape, making complete shape [-1,1])",
    ),
    (
        "bad_max_batch_size",
        int32_to_int8(batching=False),
        "max_batch_size: 1 " + TWO_IN,
        "autofill failed for model 'bad_max_batch_size': model does not support batching while non-zero "
        "max_batch_size is specified",
    ),
    (
        "too_few_inputs",
        int32_to_int8(),
        'max_batch_size: 1 input [{ name: "INPUT1" data_type: TYPE_INT32 dims: [16] }] ' + TWO_OUT,
        "unable to load model 'too_few_inputs', configuration expects 1 inputs, model provides 2",
    ),
    (
        "too_many_inputs",
        int32_to_int8(),
        "max_batch_size: 1 "
        + TWO_IN.replace("}] ", '}, { name: "INPUT_EXTRA" data_type: TYPE_INT32 dims: [16] }] ')
        + TWO_OUT,
        "unable to load model 'too_many_inputs', configuration expects 3 inputs, model provides 2",
    ),
    (
        "unknown_input",
        int32_to_int8(),
        "max_batch_size: 1 " + TWO_IN.replace('"INPUT1"', '"INPUT_UNKNOWN"') + TWO_OUT,
        "unexpected inference input 'INPUT_UNKNOWN', allowed inputs are: INPUT0, INPUT1",
    ),
    (
        "unknown_output",
        int32_to_int8(),
        "max_batch_size: 1 " + TWO_IN + 'output [{ name: "OUTPUT_UNKNOWN" data_type: TYPE_INT8 dims: [16] }]',
        "unexpected inference output 'OUTPUT_UNKNOWN', allowed outputs are: OUTPUT0, OUTPUT1",
    ),
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    repository: Path = tmp_path_factory.mktemp("onnx_autofill")
    for name, model, config, _ in SUCCESSES + FAILURES:
        onnx_models.write_model(repository, name, model, config)
    with ServerProcess(repository, "--model-control-mode", "explicit", "--allow-metrics", "false") as server:
        yield grpcclient.InferenceServerClient(server.grpc_url)


@pytest.mark.parametrize("name,model,config,expected", SUCCESSES, ids=[c[0] for c in SUCCESSES])
def test_completed_config_equals_tritons(client, name, model, config, expected):
    client.load_model(name)
    loaded = client.get_model_config(name).config
    assert text_format.MessageToString(loaded) == text_format.MessageToString(
        text_format.Parse(expected, mc.ModelConfig())
    )


@pytest.mark.parametrize("name,model,config,expected", FAILURES, ids=[c[0] for c in FAILURES])
def test_config_the_model_contradicts_fails_with_tritons_message(client, name, model, config, expected):
    with pytest.raises(InferenceServerException) as info:
        client.load_model(name)
    assert expected in str(info.value.message())
