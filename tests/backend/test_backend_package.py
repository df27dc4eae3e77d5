"""The example of docs/backends/writing-a-backend.md is a real package: installed with pip
(into a folder of its own), found through its `naiad.backends` entry point, which names the
Backend class itself, and served by `naiad serve` to tritonclient."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from naiad.testing import ServerProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "backends" / "writing-a-backend.md"


def _block(language: str, first_line: str) -> str:
    return re.findall(rf"```{language}\n{re.escape(first_line)}\n(.*?)```", DOC.read_text(), re.S)[0]


def _install_example(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    (source / "naiad_backend_echo").mkdir(parents=True)
    (source / "pyproject.toml").write_text(_block("toml", "# pyproject.toml"))
    (source / "naiad_backend_echo" / "__init__.py").write_text(_block("python", "# naiad_backend_echo/__init__.py"))
    target = tmp_path / "site"
    # No index, no build isolation: the test machine is offline and has setuptools; no
    # dependencies: naiad is the one under test, already importable.
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    assert list(target.glob("naiad_backend_echo-*.dist-info/entry_points.txt"))
    return target


def test_the_documented_backend_installs_and_serves(tmp_path):
    site = _install_example(tmp_path)
    repo = tmp_path / "models"
    (repo / "echo" / "1").mkdir(parents=True)
    (repo / "echo" / "config.pbtxt").write_text(
        'backend: "echo" max_batch_size: 8 '
        'input [{ name: "INPUT0" data_type: TYPE_STRING dims: [-1] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_STRING dims: [-1] }]'
    )
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    with ServerProcess(repo, env={"PYTHONPATH": path}) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        data = np.array([[b"a", b"bc"]], dtype=object)
        tensor = httpclient.InferInput("INPUT0", [1, 2], "BYTES")
        tensor.set_data_from_numpy(data)
        result = client.infer("echo", [tensor])
        assert result.as_numpy("OUTPUT0").tolist() == [[b"a", b"bc"]]
        assert client.get_model_config("echo")["backend"] == "echo"


def test_backend_plugin_flag_takes_the_backend_class(tmp_path):
    """`--backend-plugin MODULE:OBJECT` instantiates a class it names: a Backend class given
    there serves as well as through its entry point (nothing is installed here)."""
    (tmp_path / "code" / "naiad_backend_echo").mkdir(parents=True)
    (tmp_path / "code" / "naiad_backend_echo" / "__init__.py").write_text(
        _block("python", "# naiad_backend_echo/__init__.py")
    )
    repo = tmp_path / "models"
    (repo / "echo" / "1").mkdir(parents=True)
    (repo / "echo" / "config.pbtxt").write_text(
        'backend: "echo" input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [3] }] '
        'output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [3] }]'
    )
    path = os.pathsep.join(p for p in (str(tmp_path / "code"), os.environ.get("PYTHONPATH", "")) if p)
    with ServerProcess(repo, "--backend-plugin", "naiad_backend_echo:EchoBackend", env={"PYTHONPATH": path}) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        tensor = httpclient.InferInput("INPUT0", [3], "INT32")
        tensor.set_data_from_numpy(np.array([1, 2, 3], dtype=np.int32))
        assert client.infer("echo", [tensor]).as_numpy("OUTPUT0").tolist() == [1, 2, 3]
