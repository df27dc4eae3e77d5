"""The add_sub ensembles answer as the real Triton server answered.

tests/ensembles/triton_add_sub_repo is a Triton repository: the Python add_sub model of
shared/bench, a decoupled Python `repeat` model, and two ensembles over them (a
three-step DAG with an intermediate tensor as output; a stream through the decoupled
step). Triton served it (shared/bench/triton.sh) and ask_add_sub_ensembles.py recorded
its answers in triton_add_sub_answers.json. Here naiad serves the same ensembles: with
numpy stand-ins of the two Python models always, with the real model.py files when the
Python backend is installed, and through tritonclient when the frontends are too.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ensemble_repo import serve

from naiad import ErrorCode, InferenceRequest, NaiadError, RequestedOutput, Tensor

HERE = Path(__file__).resolve().parent
REPO = HERE / "triton_add_sub_repo"
TRITON = json.loads((HERE / "triton_add_sub_answers.json").read_text())
A = np.arange(32, dtype=np.float32).reshape(2, 16) * 0.5 - 3.0
B = (np.arange(32, dtype=np.float32).reshape(2, 16)[::-1] * 0.25 + 1.0).copy()
OUTPUTS = ["SUM", "A_PLUS_2B", "A_AGAIN", "TWO_A", "MINUS_TWO_B"]


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def numpy_copy(tmp_path: Path) -> Path:
    """The same repository with the two Python models swapped for numpy stand-ins that
    compute the same thing; the ensemble configs are untouched."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    for name, op in (("add_sub", "add_sub"), ("repeat", "count_up")):
        config = repo / name / "config.pbtxt"
        text = config.read_text().replace('backend: "python"', 'backend: "numpy"')
        config.write_text(text + f'parameters {{ key: "op" value {{ string_value: "{op}" }} }}\n')
        (repo / name / "1" / "model.py").unlink()
    return repo


def inputs(a: np.ndarray, b: np.ndarray) -> list[Tensor]:
    return [Tensor.from_numpy("INPUT0", a), Tensor.from_numpy("INPUT1", b)]


async def ask_in_process(server) -> None:
    response = await server.infer(InferenceRequest("add_sub_ensemble", inputs(A, B)))
    assert sorted(t.name for t in response.outputs) == TRITON["all_names"]
    for name in OUTPUTS:
        np.testing.assert_array_equal(response.output(name).data, np.array(TRITON["all"][name], np.float32))

    response = await server.infer(
        InferenceRequest(
            "add_sub_ensemble", inputs(A[:1], B[:1]), outputs=[RequestedOutput("TWO_A"), RequestedOutput("SUM")]
        )
    )
    assert [t.name for t in response.outputs] == TRITON["subset_order"]
    for name, value in TRITON["subset"].items():
        np.testing.assert_array_equal(response.output(name).data, np.array(value, np.float32))

    stats = server.statistics("add_sub_ensemble")[0]
    assert {
        "inference_count": stats["inference_count"],
        "execution_count": stats["execution_count"],
        "success": stats["inference_stats"]["success"]["count"],
    } == TRITON["ensemble_stats"]

    with pytest.raises(NaiadError) as info:
        await server.infer(InferenceRequest("add_sub_ensemble", inputs(A, B[:, :8].copy())))
    assert info.value.code is ErrorCode.INVALID_ARG
    assert "unexpected shape for input 'INPUT1' for model 'add_sub_ensemble'" in TRITON["bad_shape_error"]
    assert "unexpected shape for input 'INPUT1' for model 'add_sub_ensemble'" in info.value.message

    assert server.model_metadata("add_sub_stream") == TRITON["stream_metadata"]
    assert server.model_config("add_sub_stream").decoupled is True  # Triton reports it decoupled too
    responses = [
        r async for r in server.infer_stream(InferenceRequest("add_sub_stream", inputs(A[:1], B[:1]), id="s1"))
    ]
    answered = [r for r in responses if r.outputs]
    expected = [r for r in TRITON["stream"] if "outputs" in r]
    assert len(answered) == len(expected) == 3
    assert responses[-1].final
    for got, want in zip(answered, expected):
        assert (got.id, got.model_name, got.model_version) == (want["id"], want["model"], want["version"])
        for name, value in want["outputs"].items():
            np.testing.assert_array_equal(got.output(name).data, np.array(value, np.float32))


def test_numpy_stand_ins_answer_as_triton(tmp_path):
    repo = numpy_copy(tmp_path)

    async def body(server):
        assert server.startup_failures == []
        await ask_in_process(server)

    serve(repo, body)


@pytest.mark.skipif(not has("naiad_backend_python"), reason="naiad_backend_python is not installed")
def test_python_models_answer_as_triton_in_process(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)

    async def body(server):
        assert server.startup_failures == []
        await ask_in_process(server)

    serve(repo, body)


@pytest.mark.skipif(
    not (has("naiad_backend_python") and has("naiad.frontends.http") and has("naiad.frontends.grpc")),
    reason="needs naiad_backend_python and the HTTP and gRPC frontends",
)
def test_python_models_answer_as_triton_through_tritonclient(tmp_path):
    from naiad.testing import ServerProcess

    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    with ServerProcess(repo) as server:
        result = subprocess.run(
            [sys.executable, str(HERE / "ask_add_sub_ensembles.py"), str(server.http_port), str(server.grpc_port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr + server.log()
    got = json.loads(result.stdout)
    for key in ("all", "all_names", "subset", "subset_order", "ensemble_stats", "stream_metadata"):
        assert got[key] == TRITON[key], key
    assert [r.get("outputs") for r in got["stream"] if "outputs" in r] == [
        r["outputs"] for r in TRITON["stream"] if "outputs" in r
    ]
    assert got["stream"][-1]["final"] is True
    assert "unexpected shape for input 'INPUT1'" in got["bad_shape_error"]
    assert got["stream_over_http_error"].startswith("[501]") or "decoupled" in got["stream_over_http_error"]
