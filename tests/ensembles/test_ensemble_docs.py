"""docs/ensembles.md's worked example runs and prints what the page says it prints.

The files of the example are read from the page itself (each fenced block after a
`<!-- file: PATH -->` comment), so the documentation cannot drift from what works."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ensemble_repo import serve

from naiad import InferenceRequest, Server, ServerOptions, Tensor

DOC = Path(__file__).resolve().parents[2] / "docs" / "ensembles.md"
BLOCK = re.compile(r"<!-- (file|output): (\S+) -->\n```[a-z]*\n(.*?)```", re.S)


def has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def doc_blocks() -> tuple[dict[str, str], dict[str, str]]:
    files: dict[str, str] = {}
    outputs: dict[str, str] = {}
    for kind, path, body in BLOCK.findall(DOC.read_text()):
        (files if kind == "file" else outputs)[path] = body
    return files, outputs


def write_example(root: Path) -> Path:
    files, _ = doc_blocks()
    for path, body in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    (root / "models" / "add_sub_scaled" / "1").mkdir(parents=True, exist_ok=True)
    return root / "models"


def expected_output() -> dict[str, np.ndarray]:
    _, outputs = doc_blocks()
    lines = outputs["client.py"].strip().splitlines()
    return {name: np.array(json.loads(value), np.float32) for name, value in (line.split(" ", 1) for line in lines)}


def client_request() -> InferenceRequest:
    # The same tensors client.py sends.
    a = np.array([[1, 2, 3, 4]], dtype=np.float32)
    b = np.array([[1, 1, 1, 1]], dtype=np.float32)
    return InferenceRequest("add_sub_scaled", [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", b)])


def check(response) -> None:
    expected = expected_output()
    assert [t.name for t in response.outputs] == list(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(response.output(name).data, value)


def test_doc_example_files_are_complete():
    files, outputs = doc_blocks()
    assert set(files) == {
        "models/add_sub/config.pbtxt",
        "models/add_sub/1/model.py",
        "models/scale/config.pbtxt",
        "models/scale/1/model.py",
        "models/add_sub_scaled/config.pbtxt",
        "client.py",
    }
    assert set(outputs) == {"client.py"}


def test_doc_example_ensemble_runs_with_numpy_stand_ins(tmp_path):
    # The ensemble config exactly as documented; the two Python models replaced by numpy
    # models computing the same (the numpy `scale` op reads the same `factor` parameter).
    repo = write_example(tmp_path)
    for name in ("add_sub", "scale"):
        config = repo / name / "config.pbtxt"
        config.write_text(
            config.read_text().replace('backend: "python"', 'backend: "numpy"')
            + f'parameters {{ key: "op" value {{ string_value: "{name}" }} }}\n'
        )
        (repo / name / "1" / "model.py").unlink()

    async def body(server):
        assert server.startup_failures == []
        check(await server.infer(client_request()))

    serve(repo, body)


@pytest.mark.skipif(not has("naiad_backend_python"), reason="naiad_backend_python is not installed")
def test_doc_example_runs_with_its_python_models(tmp_path):
    import asyncio

    repo = write_example(tmp_path)

    async def go():
        async with Server(ServerOptions([str(repo)])) as server:
            assert server.startup_failures == []
            check(await server.infer(client_request()))

    asyncio.run(go())


@pytest.mark.skipif(
    not (has("naiad_backend_python") and has("naiad.frontends.http")),
    reason="needs naiad_backend_python and the HTTP frontend",
)
def test_doc_example_client_prints_what_the_doc_says(tmp_path):
    from naiad.testing import ServerProcess

    repo = write_example(tmp_path)
    _, outputs = doc_blocks()
    with ServerProcess(repo) as server:
        result = subprocess.run(
            [sys.executable, str(tmp_path / "client.py"), server.http_url], capture_output=True, text=True, timeout=120
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout == outputs["client.py"]
