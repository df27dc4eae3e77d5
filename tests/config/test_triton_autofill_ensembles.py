"""Ensembles auto-completed as Triton completes them (qa/L0_model_config/
autofill_noplatform_success/ensemble): the loaded config, read back over gRPC with
tritonclient, equals Triton's expected config: a default version policy and a transaction
policy, and none of the instance groups, optimization or model file a backend model gets."""

from __future__ import annotations

import pytest
import tritonclient.grpc as grpcclient
from google.protobuf import text_format
from triton_servers import explicit_server
from tritonclient.grpc import model_config_pb2 as mc

# The steps: the numpy test backend's identity stands in for Triton's identity models.
IDENTITY_STEP = """name: "{name}" max_batch_size: 4 backend: "numpy"
parameters {{ key: "op" value {{ string_value: "identity" }} }}
instance_group [{{ kind: KIND_CPU }}]
"""
FP32_16 = "data_type: TYPE_FP32 dims: [16]"

ENSEMBLE_BODY = """max_batch_size: 2 platform: "ensemble"
ensemble_scheduling {{ step [{{ model_name: "{step}" model_version: -1 {maps} }}] }}
input [{{ name: "data" {t} }}] output [{{ name: "prob" {t} }}]
"""

REPOSITORY = {
    "fp32_dim1_batch4": IDENTITY_STEP.format(name="fp32_dim1_batch4")
    + f'input [{{ name: "INPUT0" {FP32_16} }}] output [{{ name: "OUTPUT0" {FP32_16} }}]',
    "fp32_dim1_batch4_output3": IDENTITY_STEP.format(name="fp32_dim1_batch4_output3")
    + "input ["
    + ", ".join(f'{{ name: "INPUT{i}" {FP32_16} }}' for i in range(3))
    + "] output ["
    + ", ".join(f'{{ name: "OUTPUT{i}" {FP32_16} }}' for i in range(3))
    + "]",
    "fp32_dim2_nobatch": 'name: "fp32_dim2_nobatch" max_batch_size: 0 backend: "numpy" '
    'parameters { key: "op" value { string_value: "identity" } } instance_group [{ kind: KIND_CPU }] '
    'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [-1, 16] }] '
    'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1, 16] }]',
    # A batching step feeds a non-batching one whose first dimension takes the batch, and
    # the reverse: the shapes agree once the batch dimension is counted.
    "inconsistent_shape": 'name: "inconsistent_shape" max_batch_size: 2 platform: "ensemble" '
    'ensemble_scheduling { step [{ model_name: "fp32_dim1_batch4" model_version: -1 '
    'input_map { key: "INPUT0" value: "data" } output_map { key: "OUTPUT0" value: "temp_tensor" } }, '
    '{ model_name: "fp32_dim2_nobatch" model_version: -1 input_map { key: "INPUT0" value: "temp_tensor" } '
    'output_map { key: "OUTPUT0" value: "prob" } }] } '
    f'input [{{ name: "data" {FP32_16} }}] output [{{ name: "prob" {FP32_16} }}]',
    "inconsistent_shape_2": 'name: "inconsistent_shape_2" max_batch_size: 0 platform: "ensemble" '
    'ensemble_scheduling { step [{ model_name: "fp32_dim2_nobatch" model_version: -1 '
    'input_map { key: "INPUT0" value: "data" } output_map { key: "OUTPUT0" value: "temp_tensor" } }, '
    '{ model_name: "fp32_dim1_batch4" model_version: -1 input_map { key: "INPUT0" value: "temp_tensor" } '
    'output_map { key: "OUTPUT0" value: "prob" } }] } '
    'input [{ name: "data" data_type: TYPE_FP32 dims: [4, 16] }] '
    'output [{ name: "prob" data_type: TYPE_FP32 dims: [4, 16] }]',
    "inner_ensemble": 'name: "inner_ensemble" '
    + ENSEMBLE_BODY.format(
        step="fp32_dim1_batch4",
        maps='input_map { key: "INPUT0" value: "data" } output_map { key: "OUTPUT0" value: "prob" }',
        t=FP32_16,
    ),
    "embedded_ensemble": 'name: "embedded_ensemble" '
    + ENSEMBLE_BODY.format(
        step="inner_ensemble",
        maps='input_map { key: "data" value: "data" } output_map { key: "prob" value: "prob" }',
        t=FP32_16,
    ),
    # A step output no ensemble tensor takes is fine (OUTPUT1, OUTPUT2).
    "unmapped_output": 'name: "unmapped_output" '
    + ENSEMBLE_BODY.format(
        step="fp32_dim1_batch4_output3",
        maps=" ".join(f'input_map {{ key: "INPUT{i}" value: "data" }}' for i in range(3))
        + ' output_map { key: "OUTPUT0" value: "prob" }',
        t=FP32_16,
    ),
}

# What Triton reports: the config as written plus these two fields, nothing else.
FILLED = "version_policy { latest { num_versions: 1 } } model_transaction_policy { }"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    repository = tmp_path_factory.mktemp("ensembles")
    for name, text in REPOSITORY.items():
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "config.pbtxt").write_text(text)
    with explicit_server(repository, grpc=True) as server:
        grpc = grpcclient.InferenceServerClient(server.grpc_url)
        for name in ("unmapped_output", "embedded_ensemble", "inconsistent_shape", "inconsistent_shape_2"):
            grpc.load_model(name)
        yield grpc


@pytest.mark.parametrize(
    "name", ["unmapped_output", "embedded_ensemble", "inner_ensemble", "inconsistent_shape", "inconsistent_shape_2"]
)
def test_ensemble_config_equals_tritons_expected_config(client, name):
    expected = text_format.Parse(REPOSITORY[name] + FILLED, mc.ModelConfig())
    assert client.get_model_config(name).config == expected
