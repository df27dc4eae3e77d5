"""Triton's PyTorch auto-complete cases (qa/L0_model_config/autofill_noplatform/pytorch and
autofill_noplatform_success/pytorch), our own copies, through a real server and tritonclient:
the loaded configs read back over gRPC equal Triton's expected configs for a host without
GPUs (the file name is filled in only when the config named it), and the configs Triton
refuses fail with its message."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch_models
import tritonclient.grpc as grpcclient
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from naiad.testing import ServerProcess, gpu_ids

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

INT_IO = (
    'input [{ name: "INPUT__0" data_type: TYPE_INT32 dims: [16] }, { name: "INPUT__1" data_type: TYPE_INT32 dims: [16] }] '
    'output [{ name: "OUTPUT__0" data_type: TYPE_INT32 dims: [16] }, '
    '{ name: "OUTPUT__1" data_type: TYPE_INT32 dims: [16] }] '
)
FILLED = (
    'platform: "pytorch_libtorch" backend: "pytorch" version_policy { latest { num_versions: 1 } } '
    "optimization { input_pinned_memory { enable: true } output_pinned_memory { enable: true } } "
)

# (model, config.pbtxt, Triton's expected config on a host without GPUs)
SUCCESSES = [
    (
        "no_name_platform",
        f"max_batch_size: 8 {INT_IO}",
        f'name: "no_name_platform" max_batch_size: 8 {INT_IO} {FILLED} '
        'instance_group { name: "no_name_platform" count: 1 kind: KIND_CPU }',
    ),
    (
        "cpu_instance",
        f'name: "cpu_instance" platform: "pytorch_libtorch" max_batch_size: 8 {INT_IO} '
        'instance_group { name: "cpu_instance" kind: KIND_CPU } default_model_filename: "model.pt" backend: "pytorch"',
        f'name: "cpu_instance" max_batch_size: 8 {INT_IO} {FILLED} default_model_filename: "model.pt" '
        'instance_group { name: "cpu_instance" count: 1 kind: KIND_CPU }',
    ),
]

# (model, config.pbtxt, the text Triton's log shows)
FAILURES = [
    (
        "too_few_inputs",
        'max_batch_size: 1 backend: "pytorch" output [{ name: "OUTPUT__0" data_type: TYPE_INT8 dims: [16] }, '
        '{ name: "OUTPUT__1" data_type: TYPE_INT8 dims: [16] }]',
        "unable to load model 'too_few_inputs', configuration expects 0 inputs, model provides 2",
    ),
    (
        "too_few_outputs",
        'max_batch_size: 1 backend: "pytorch" input [{ name: "INPUT__0" data_type: TYPE_INT32 dims: [16] }, '
        '{ name: "INPUT__1" data_type: TYPE_INT32 dims: [16] }]',
        "model configuration must contain at least one output, none were specified",
    ),
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    repository: Path = tmp_path_factory.mktemp("pytorch_autofill")
    for name, config, _ in SUCCESSES + FAILURES:
        torch_models.script(torch_models.AddSub(), repository / name / "1" / "model.pt")
        torch_models.write_config(repository, name, config)
    with ServerProcess(repository, "--model-control-mode", "explicit", "--allow-metrics", "false") as server:
        yield grpcclient.InferenceServerClient(server.grpc_url)


@pytest.mark.skipif(bool(gpu_ids()), reason="the expected configs are those of a host without GPUs")
@pytest.mark.parametrize("name,config,expected", SUCCESSES, ids=[c[0] for c in SUCCESSES])
def test_loaded_config_equals_tritons(client, name, config, expected):
    client.load_model(name)
    loaded = client.get_model_config(name).config
    assert text_format.MessageToString(loaded) == text_format.MessageToString(
        text_format.Parse(expected, mc.ModelConfig())
    )


@pytest.mark.parametrize("name,config,expected", FAILURES, ids=[c[0] for c in FAILURES])
def test_what_triton_refuses_fails_with_its_message(client, name, config, expected):
    with pytest.raises(InferenceServerException) as info:
        client.load_model(name)
    assert expected in str(info.value.message())
