"""Triton's cases of a config that names no backend (qa/L0_model_config/autofill_noplatform/
common and custom), our own copies, loaded through tritonclient: without a model file that
identifies one, the backend comes from a model name `<anything>.<backend>`, else the load
fails with Triton's message."""

from __future__ import annotations

import pytest
import tritonclient.http as httpclient
from triton_servers import explicit_server, load_error

IO = (
    'input [{ name: "input" data_type: TYPE_FP32 dims: [16] }] '
    'output [{ name: "output" data_type: TYPE_FP32 dims: [16] }]'
)

# (model, config.pbtxt, whether it has a `1/` folder, the text Triton's log shows)
CASES = [
    (
        "no_version",
        f'name: "no_version" max_batch_size: 1 {IO}',
        False,
        "Invalid model name: Could not determine backend for model 'no_version' with no backend in model "
        "configuration. Expected model name of the form 'model.<backend_name>'.",
    ),
    (
        "no_delimiter",
        "",
        True,
        "Invalid model name: Could not determine backend for model 'no_delimiter' with no backend in model "
        "configuration. Expected model name of the form 'model.<backend_name>'.",
    ),
    (
        "unknown_backend.unknown",
        "",
        True,
        "unable to find backend library for backend 'unknown', try specifying runtime on the model configuration.",
    ),
]


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, str]:
    repository = tmp_path_factory.mktemp("backend_resolution")
    for name, config, versioned, _ in CASES:
        (repository / name).mkdir()
        (repository / name / "config.pbtxt").write_text(config)
        if versioned:
            (repository / name / "1").mkdir()
    with explicit_server(repository) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        return {name: load_error(client, name) for name, _, _, _ in CASES}


@pytest.mark.parametrize("name,config,versioned,expected", CASES, ids=[c[0] for c in CASES])
def test_unresolved_backend_is_refused_with_tritons_message(refusals, name, config, versioned, expected):
    assert expected in refusals[name]
