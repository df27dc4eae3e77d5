"""A load whose 'config' parameter is not a JSON object fails as Triton's does over both
protocols: INTERNAL / 500, "failed to load '<model>', failed to poll from model repository"
(Triton's simple_{grpc,http}_model_control.py examples send such a config and look for "failed
to load"), with naiad's reason after it; the server goes on serving the model."""

from __future__ import annotations

import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from grpc_servers import numpy_server, write_repository
from tritonclient.utils import InferenceServerException

# The example's own malformed override, then JSON that is not an object.
CONFIGS = {
    '"parameters": {"config": {{"max_batch_size": "16"}}}': "the 'config' parameter is not valid JSON",
    "[1]": "the 'config' parameter must be a JSON object",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = write_repository(tmp_path_factory.mktemp("override"), ["identity"])
    with numpy_server(
        repo, "--model-control-mode", "explicit", "--load-model", "identity", "--allow-http", "true"
    ) as process:
        yield process


@pytest.mark.parametrize("config", CONFIGS)
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
