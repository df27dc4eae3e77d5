"""A Python model's `auto_complete_config` that replaces a value config.pbtxt writes (Triton
lets `set_max_batch_size` replace a written 0) loads as Triton loads it, with a warning in the
server's log naming both values; one that fills a value the config leaves out is logged as
Triton logs it. Through tritonclient and the log of `naiad serve`."""

from __future__ import annotations

from pathlib import Path

import pytest
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

MODEL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.set_max_batch_size(4)
        config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]})
        config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]})
        return config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())]) for r in requests]
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    repository: Path = tmp_path_factory.mktemp("python_auto_complete_changes")
    for name, config in (("written_zero", 'backend: "python"\nmax_batch_size: 0\n'), ("absent", 'backend: "python"')):
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "1" / "model.py").write_text(MODEL_PY)
        (repository / name / "config.pbtxt").write_text(config)
    with ServerProcess(repository, "--allow-grpc", "false", "--allow-metrics", "false") as server:
        yield server, httpclient.InferenceServerClient(server.http_url)


def test_a_written_value_the_model_replaces_is_logged_with_both(served):
    server, client = served
    assert client.get_model_config("written_zero")["max_batch_size"] == 4
    assert (
        "model 'written_zero': auto-complete changed max_batch_size from 0 (as config.pbtxt writes it) to 4"
        in server.log()
    )


def test_a_value_the_model_fills_in_is_logged_as_triton_logs_it(served):
    server, client = served
    assert client.get_model_config("absent")["max_batch_size"] == 4
    log = server.log()
    assert "model 'absent': auto-complete set max_batch_size to 4, since the model supports batching" in log
    assert "model 'absent': auto-complete changed" not in log
