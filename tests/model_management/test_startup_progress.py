"""Start-up you can watch: a load that takes longer than 5 s says "still loading NAME (N s)"
every 5 s, and a repository without a model directory is warned about (it serves nothing,
yet reports ready). Read from the log of a real `naiad serve`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

TESTS_DIR = Path(__file__).resolve().parents[1]

SLOW = (
    'backend: "numpy" '
    'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }] '
    'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }] '
    'parameters [{ key: "op" value: { string_value: "identity" } }, '
    '{ key: "load_ms" value: { string_value: "12500" } }]'
)


def _server(*repositories: Path) -> ServerProcess:
    python_path = os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return ServerProcess(
        *repositories,
        "--backend-plugin",
        "numpy_backend:NumpyPlugin",
        "--allow-grpc",
        "false",
        "--allow-metrics",
        "false",
        env={"PYTHONPATH": python_path},
    )


@pytest.mark.slow
def test_a_slow_load_says_it_is_still_loading_every_five_seconds(tmp_path):
    (tmp_path / "slow" / "1").mkdir(parents=True)
    (tmp_path / "slow" / "config.pbtxt").write_text(SLOW)
    with _server(tmp_path) as server:
        assert httpclient.InferenceServerClient(server.http_url).is_model_ready("slow")
        lines = re.findall(r"still loading (\S+) \((\d+) s\)", server.log())
    # 12.5 s of loading: a line at 5 s and at 10 s, none after the load ended.
    assert [name for name, _ in lines] == ["slow", "slow"]
    assert [int(seconds) for _, seconds in lines] == [5, 10]


def test_an_empty_repository_is_warned_about(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with _server(empty) as server:
        assert httpclient.InferenceServerClient(server.http_url).is_server_ready()
        log = server.log()
    assert f"model repository '{empty}' holds no model directory: the server serves no model" in log


def test_a_repository_with_a_model_is_not_warned_about(tmp_path):
    (tmp_path / "quick" / "1").mkdir(parents=True)
    (tmp_path / "quick" / "config.pbtxt").write_text(SLOW.replace("12500", "0"))
    with _server(tmp_path) as server:
        assert httpclient.InferenceServerClient(server.http_url).is_model_ready("quick")
        log = server.log()
    assert "holds no model directory" not in log
    assert "still loading" not in log
