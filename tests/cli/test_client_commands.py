"""`naiad models` and `naiad infer`, run as commands against a real `naiad serve`: the
repository index as a table, one request's outputs, and errors that name what was wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "http"))
from http_servers import MODELS, server_process, write_repository  # noqa: E402

BROKEN = 'backend: "no_such_backend" max_batch_size: 0'


def naiad(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "naiad.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = write_repository(
        tmp_path_factory.mktemp("models"),
        {"add_sub": MODELS["add_sub"], "echo": MODELS["echo"], "identity": MODELS["identity"], "broken": BROKEN},
    )
    flags = ("--model-control-mode", "explicit", "--exit-on-error", "false")
    loads = ("--load-model", "add_sub", "--load-model", "echo", "--load-model", "broken")
    with server_process(repo, *flags, *loads) as process:
        yield process


def test_models_prints_the_repository_index_as_a_table(server):
    result = naiad("models", "-u", server.http_url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    cells = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines if line.startswith("|")]
    assert cells[0] == ["Name", "Version", "State", "Reason"]
    rows = {row[0]: row[1:] for row in cells[1:]}
    assert rows["add_sub"] == ["1", "READY", ""]
    assert rows["echo"] == ["1", "READY", ""]
    assert rows["identity"] == ["-", "-", ""]  # never loaded: the index has no state for it
    assert rows["broken"][:2] == ["-", "UNAVAILABLE"]
    assert rows["broken"][2].startswith("backend 'no_such_backend' is not installed")  # the server's words
    assert list(rows) == ["add_sub", "broken", "echo", "identity"]


def test_infer_sends_json_and_npy_inputs_and_prints_each_output(server, tmp_path):
    second = tmp_path / "second.npy"
    np.save(second, np.array([[1, 1, 1, 1]], np.float32))
    result = naiad(
        "infer", "add_sub", "--input", "INPUT0=[1, 2, 3, 4]", "--input", f"INPUT1={second}", "-u", server.http_url
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "OUTPUT0 FP32 [1, 4]\n[[2. 3. 4. 5.]]\nOUTPUT1 FP32 [1, 4]\n[[0. 1. 2. 3.]]\n"


def test_infer_prints_only_the_outputs_asked_for_and_bytes_as_text(server):
    result = naiad(
        "infer",
        "add_sub",
        "-i",
        "INPUT0=[[1,2,3,4]]",
        "-i",
        "INPUT1=[[4,3,2,1]]",
        "-o",
        "OUTPUT1",
        "--url",
        server.http_url,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "OUTPUT1 FP32 [1, 4]\n[[-3. -1.  1.  3.]]\n"
    echoed = naiad("infer", "echo", "--input", "INPUT0=[7]", "--url", f"http://{server.http_url}")
    assert echoed.returncode == 0, echoed.stderr
    assert echoed.stdout == "OUTPUT0 BYTES [1]\n['{}']\n"
    raw = naiad("infer", "add_sub", "-i", "INPUT0=[1,2,3,4]", "-i", "INPUT1=[1,2,3,4]", "--json", "-u", server.http_url)
    assert raw.returncode == 0, raw.stderr
    outputs = {o["name"]: o for o in json.loads(raw.stdout)["outputs"]}
    assert outputs["OUTPUT0"] == {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 4], "data": [2.0, 4.0, 6.0, 8.0]}


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["add_sub", "--input", "INPUT9=[1,2,3,4]"],
            "model 'add_sub' has no input 'INPUT9' (its inputs: INPUT0, INPUT1)",
        ),
        (["add_sub", "--input", "INPUT0=missing.npy"], "--input INPUT0: no file 'missing.npy'"),
        (["add_sub", "--input", "INPUT0=[1,2,"], "--input INPUT0: '[1,2,' is neither a .npy file nor JSON"),
        (
            ["echo", "--input", "INPUT0=[1.5]"],
            "--input INPUT0: values of type float64 do not fit the input's datatype INT32",
        ),
        (["nope", "--input", "INPUT0=[1]"], "HTTP 404: Request for unknown model: 'nope' is not found"),
        (["add_sub", "--input", "INPUT0=[1,2,3]", "--input", "INPUT1=[1,2,3]"], "HTTP 400: "),
    ],
    ids=["unknown-input", "missing-file", "bad-json", "float-for-int", "unknown-model", "wrong-shape"],
)
def test_infer_errors_name_what_was_wrong(server, args, message):
    result = naiad("infer", *args, "-u", server.http_url)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and message in result.stderr


def test_a_malformed_input_flag_is_a_usage_error():
    result = naiad("infer", "add_sub", "--input", "INPUT0")
    assert result.returncode == 2
    assert "--input 'INPUT0': expected NAME=FILE.npy or NAME=JSON" in result.stderr


def test_a_server_that_is_not_there_is_named(tmp_path):
    from naiad.testing import free_port

    url = f"127.0.0.1:{free_port()}"
    for command in (["models"], ["infer", "add_sub", "--input", "INPUT0=[1]"]):
        result = naiad(*command, "-u", url)
        assert result.returncode == 1
        assert f"error: cannot reach the server at http://{url}: " in result.stderr
    bad = naiad("models", "-u", "ftp://host:1")
    assert bad.returncode == 2 and "--url 'ftp://host:1': the scheme must be http or https, not 'ftp'" in bad.stderr
