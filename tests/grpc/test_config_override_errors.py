"""A load whose 'config' parameter is not a JSON object fails as Triton's does over both
protocols: INTERNAL / 500, "failed to load '<model>', failed to poll from model repository"
(Triton's simple_{grpc,http}_model_control.py examples send such a config and look for "failed
to load"), with naiad's reason after it; the server goes on serving the model."""

from __future__ import annotations

import json

import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from grpc_servers import numpy_server, write_repository
from tritonclient.utils import InferenceServerException

# The example's own malformed override, then JSON that is not an object.
CONFIGS = {
    '"parameters": {"config": {{"max_batch_size": "16"}}}': "the 'config' parameter is not valid JSON",
    "[1]": "the 'config' parameter must be a JSON object",
    # Found by tests/security/test_fuzz.py: json's decoder recursed past the stack (a 500 naming
    # RecursionError).
    "[" * 100_000 + "]" * 100_000: "the 'config' parameter is not valid JSON: it is nested too deeply",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("override"), ["identity"])
    with numpy_server(
        repo, "--model-control-mode", "explicit", "--load-model", "identity", "--allow-http", "true"
    ) as process:
        yield process


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c[:40])
def test_malformed_config_override_fails_as_a_failed_poll(server, config):
    expected = "failed to load 'identity', failed to poll from model repository: " + CONFIGS[config]
    with tg.InferenceServerClient(server.grpc_url) as grpc_client:
        with pytest.raises(InferenceServerException) as grpc_error:
            grpc_client.load_model("identity", config=config)
        assert grpc_error.value.status() == "StatusCode.INTERNAL"
        assert grpc_error.value.message().startswith(expected), grpc_error.value.message()
        assert grpc_client.is_model_ready("identity")
    http_client = th.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as http_error:
        http_client.load_model("identity", config=config)
    assert http_error.value.status() == "500"
    assert http_error.value.message().startswith(expected), http_error.value.message()
    assert http_client.is_model_ready("identity")


def _identity(**changes: object) -> str:
    """A config override of `identity` in Triton's JSON form, with `changes` made to it."""
    config: dict[str, object] = {
        "name": "identity",
        "backend": "numpy",
        "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    }
    config.update(changes)
    return json.dumps(config)


# Found by tests/security/test_fuzz.py: each was a 500 naming a Python exception (or, for
# the instance count, a load that ran for minutes and then exhausted the server's memory).
REFUSED = {
    "an enum number no enum value has": (
        _identity(output=[{"name": "OUTPUT0", "data_type": -2, "dims": [-1]}]),
        "output[0].data_type: -2 is not a value of DataType",
    ),
    "infinity for an enum": (
        _identity(output=[{"name": "OUTPUT0", "data_type": float("-inf"), "dims": [-1]}]),
        "config JSON does not parse: cannot convert float infinity to integer",
    ),
    "an instance count past the bound": (
        _identity(instance_group=[{"kind": "KIND_CPU", "count": 2**31 - 1}]),
        "instance_group: 2147483647 instances in all; a model version may have at most 10000",
    ),
    "priority levels past the bound": (
        _identity(dynamic_batching={"priority_levels": 2**40, "default_priority_level": 1}),
        "dynamic_batching.priority_levels: 1099511627776 levels; at most 10000 are supported",
    ),
    "a backend no package provides": (
        _identity(backend="no_such_backend"),
        "backend 'no_such_backend' is not installed (installed backends: ",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_config_override_a_load_cannot_use_is_a_client_error(server, case):
    config, expected = REFUSED[case]
    with tg.InferenceServerClient(server.grpc_url) as grpc_client:
        with pytest.raises(InferenceServerException) as grpc_error:
            grpc_client.load_model("identity", config=config)
        assert grpc_error.value.status() == "StatusCode.INVALID_ARGUMENT", grpc_error.value.message()
        assert expected in grpc_error.value.message(), grpc_error.value.message()
    http_client = th.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as http_error:
        http_client.load_model("identity", config=config)
    assert http_error.value.status() == "400", http_error.value.message()
    assert expected in http_error.value.message(), http_error.value.message()
    # The model's own config.pbtxt loads again after a refused override.
    http_client.load_model("identity")
    assert http_client.is_model_ready("identity")
