"""The wheels scripts/build-wheels.sh builds install on their own: `naiad` (with `naiad-wire`,
which it depends on) and `naiad-backend-onnx` alone in an empty virtual environment serve an
ONNX model to tritonclient (issue 18, item 1).

It builds nine wheels (the core, naiad-wire, five backends, two integrations) and installs into a new environment (a minute or so, most of it pip),
so it runs in CI (CI=true) or when NAIAD_TEST_PACKAGING=1, and is skipped otherwise."""

import os
import re
import subprocess
import venv
import zipfile
from email.parser import Parser

import numpy as np
import pytest
import tritonclient.http as httpclient
from distributions import ROOT, distribution_dirs, project_table

from naiad.testing import ServerProcess

pytestmark = [
    pytest.mark.packaging,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("CI", "").lower() != "true" and os.environ.get("NAIAD_TEST_PACKAGING") != "1",
        reason="builds and installs wheels (~1 min): runs in CI or with NAIAD_TEST_PACKAGING=1",
    ),
]

pytest.importorskip("onnx")


def write_add_model(path):
    from onnx import TensorProto, helper

    a, b, total = (helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in ("A", "B", "SUM"))
    graph = helper.make_graph([helper.make_node("Add", ["A", "B"], ["SUM"])], "add", [a, b], [total])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    path.parent.mkdir(parents=True)
    path.write_bytes(model.SerializeToString())


def wheel_metadata(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(metadata).decode()), names


def test_wheels_install_alone_and_serve(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-wheels.sh"), str(wheels)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    built = {wheel_metadata(w)[0]["Name"]: w for w in wheels.glob("*.whl")}
    assert set(built) == {project_table(d)["name"] for d in distribution_dirs()}
    # A line as each wheel starts (the compiled ones take minutes), and one at the end.
    progress = re.findall(r"^build-wheels\.sh \[ *\d+ s\] (.*)$", build.stderr, re.MULTILINE)
    assert progress[0] == "building the core (naiad)"
    assert len([line for line in progress if line.startswith("building ")]) == len(built)
    assert progress[-1] == f"done: {len(built)} wheels in {wheels}"
    for name, wheel in built.items():
        metadata, names = wheel_metadata(wheel)
        assert metadata["License-Expression"] == "Apache-2.0", name
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), name
        assert metadata.get_payload().startswith(f"# {name}"), name  # the readme is the description

    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # Our three wheels by file, so nothing of ours can come from an index; their dependencies
    # from the package index (or pip's cache).
    pip = subprocess.run(
        [python, "-m", "pip", "install", "-q", built["naiad"], built["naiad-wire"], built["naiad-backend-onnx"]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    freeze = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True
    ).stdout.lower()
    installed = dict(line.split("==", 1) for line in freeze.split())
    assert installed["naiad"] == installed["naiad-wire"] == installed["naiad-backend-onnx"] == "0.1.0"
    assert "onnxruntime" in installed
    for absent in ("naiad-backend-python", "torch", "tensorflow-cpu", "pytest", "tritonclient", "onnx"):
        assert absent not in installed, absent
    # The server below runs from the repository root: it must still import the wheels' code.
    where = subprocess.run(
        [
            python,
            "-c",
            "import naiad, naiad_wire as w, naiad_backend_onnx as b; print(naiad.__file__, w.__file__, b.__file__);"
            "print(','.join(w.compiled_modules()))",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert all(path.startswith(str(env_dir)) for path in where[:3]), where
    # The wire wheel is built with its request path compiled (wire/setup.py): fast by default.
    assert {"http1", "http2", "header_compression"} <= set(where[3].split(",")), where

    repo = tmp_path / "models"
    write_add_model(repo / "add" / "1" / "model.onnx")  # no config.pbtxt: auto-complete
    server = ServerProcess(repo, env={"PYTHONPATH": ""})
    server.args[0] = str(python)  # the new environment's naiad, not this one's
    with server:
        client = httpclient.InferenceServerClient(server.http_url)
        a = np.arange(8, dtype=np.float32).reshape(2, 4)
        inputs = [httpclient.InferInput("A", [2, 4], "FP32"), httpclient.InferInput("B", [2, 4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(a)
        np.testing.assert_array_equal(client.infer("add", inputs).as_numpy("SUM"), a + a)
        assert client.get_model_metadata("add")["platform"] == "onnxruntime_onnx"
