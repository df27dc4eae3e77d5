"""`naiad check`'s command line: the text report (compiler-style, coloured only on a
terminal), the exit status, the JSON document, several repositories, the bundled example
repositories, and its time on a repository of 20 models."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from naiad.devices import gpu_ids

pytest.importorskip("onnx")
pytest.importorskip("naiad_backend_onnx")
pytest.importorskip("naiad_backend_python")

from checked_repositories import PYTHON_MODEL, add_sub_onnx, check_json, run_check, write_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

BROKEN = {
    "config.pbtxt": 'backend: "python"\nmax_batch_szie: 4\n',
    "1/model.py": PYTHON_MODEL,
}
ZERO_BATCH = {"config.pbtxt": 'platform: "onnxruntime_onnx"\nmax_batch_size: 0\n', "1/model.onnx": add_sub_onnx()}
SOUND = {"config.pbtxt": 'platform: "onnxruntime_onnx"\n', "1/model.onnx": add_sub_onnx()}


def test_text_report_is_grouped_by_model_as_a_compiler_prints_it(tmp_path):
    write_model(tmp_path, "broken", BROKEN)
    write_model(tmp_path, "zero_batch", ZERO_BATCH)
    write_model(tmp_path, "sound", SOUND)
    done = run_check(str(tmp_path))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "model 'broken':",
        f"{tmp_path}/broken/config.pbtxt:2:1: error: config.pbtxt line 2: unknown field max_batch_szie; did you mean "
        "max_batch_size?",
        "  fix: rename max_batch_szie to max_batch_size",
        "model 'zero_batch':",
        f"{tmp_path}/zero_batch/config.pbtxt:2:1: warning: max_batch_size is written as 0, so auto-complete keeps it "
        "and the model serves without batching; without that line auto-complete would set max_batch_size to 4, "
        "since the model supports batching",
        "  fix: remove `max_batch_size: 0` to batch up to 4, or keep it to serve without batching",
        "1 error, 1 warning; 3 models checked, 1 would fail to load",
    ]
    assert done.stderr == ""


def test_the_report_is_coloured_on_a_terminal_only(tmp_path):
    write_model(tmp_path, "broken", BROKEN)
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "naiad.cli", "check", str(tmp_path)], stdout=follower, stderr=subprocess.PIPE
    ) as process:
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            shown += chunk
        assert process.wait(timeout=60) == 1
    os.close(leader)
    assert b"\x1b[31merror\x1b[0m: config.pbtxt line 2: unknown field max_batch_szie" in shown
    piped = run_check(str(tmp_path))
    assert "\x1b[" not in piped.stdout
    no_color = run_check(str(tmp_path), env={**os.environ, "NO_COLOR": "1"})
    assert "\x1b[" not in no_color.stdout


def test_warnings_alone_exit_zero_and_the_json_document_has_its_schema(tmp_path):
    write_model(tmp_path, "zero_batch", ZERO_BATCH)
    write_model(tmp_path, "sound", SOUND)
    status, document = check_json("--model-repository", str(tmp_path))
    assert status == 0
    assert document == {
        "schema_version": 1,
        "findings": [
            {
                "severity": "warning",
                "model": "zero_batch",
                "repository": str(tmp_path),
                "file": "zero_batch/config.pbtxt",
                "line": 2,
                "column": 1,
                "message": "max_batch_size is written as 0, so auto-complete keeps it and the model serves without "
                "batching; without that line auto-complete would set max_batch_size to 4, since the model supports "
                "batching",
                "fix": "remove `max_batch_size: 0` to batch up to 4, or keep it to serve without batching",
            }
        ],
        "summary": {"errors": 0, "warnings": 1, "models": 2, "failing_models": []},
    }


def test_backend_config_reaches_auto_complete(tmp_path):
    write_model(tmp_path, "zero_batch", ZERO_BATCH)
    _, document = check_json(str(tmp_path), "--backend-config", "onnxruntime,default-max-batch-size=16")
    assert "auto-complete would set max_batch_size to 16" in document["findings"][0]["message"]


def test_without_auto_complete_a_config_must_list_its_tensors(tmp_path):
    write_model(tmp_path, "no_config", {"1/model.onnx": add_sub_onnx()})
    write_model(tmp_path, "no_tensors", SOUND)
    status, document = check_json(str(tmp_path), "--disable-auto-complete-config")
    assert status == 1
    assert [(f["model"], f["file"], f["line"], f["message"], f["fix"]) for f in document["findings"]] == [
        (
            "no_config",
            "no_config/",
            None,
            "config.pbtxt: not found, and auto-complete is disabled",
            "write no_config/config.pbtxt, or let auto-complete fill it in (no --disable-auto-complete-config)",
        ),
        (
            "no_tensors",
            "no_tensors/config.pbtxt",
            None,
            "unable to load model 'no_tensors', configuration expects 0 inputs, model provides 2",
            "make the config agree with the model file (or leave its inputs and outputs out, and auto-complete "
            "fills them in from the model)",
        ),
    ]
    # With auto-complete (the default), both load.
    status, document = check_json(str(tmp_path))
    assert (status, document["findings"]) == (0, [])


def test_several_repositories_are_checked_together_and_a_model_in_two_is_an_error(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    write_model(first, "sound", SOUND)
    write_model(second, "broken", BROKEN)
    write_model(second, "sound", SOUND)
    status, document = check_json("--model-repository", str(first), "--model-repository", str(second))
    assert status == 1
    assert [(f["model"], f["repository"], f["file"], f["message"]) for f in document["findings"]] == [
        (
            "sound",
            f"{first}, {second}",
            "",
            f"model 'sound' appears in more than one model repository: {first}, {second}",
        ),
        (
            "broken",
            str(second),
            "broken/config.pbtxt",
            "config.pbtxt line 2: unknown field max_batch_szie; did you mean max_batch_size?",
        ),
    ]


def test_a_missing_repository_is_named(tmp_path):
    status, document = check_json(str(tmp_path / "nowhere"))
    assert status == 1
    assert [(f["repository"], f["message"]) for f in document["findings"]] == [
        (str(tmp_path / "nowhere"), f"model repository '{tmp_path / 'nowhere'}' is not a directory")
    ]


@pytest.mark.skipif(bool(gpu_ids()), reason="this machine has the GPU the config asks for")
def test_a_gpu_group_on_a_machine_without_gpus_is_a_warning(tmp_path):
    config = 'backend: "python"\ninstance_group [ { count: 1 kind: KIND_GPU } ]\n'
    write_model(tmp_path, "gpu", {"config.pbtxt": config, "1/model.py": PYTHON_MODEL})
    status, document = check_json(str(tmp_path))
    assert status == 0
    assert [(f["severity"], f["line"], f["message"], f["fix"]) for f in document["findings"]] == [
        (
            "warning",
            2,
            "instance group gpu_0 of model gpu has kind KIND_GPU but no GPUs are available (on this machine)",
            "serve it where those GPUs are, or use kind: KIND_CPU here",
        )
    ]


def test_a_model_directory_named_as_a_repository_points_at_its_parent(tmp_path):
    write_model(tmp_path, "sound", SOUND)
    status, document = check_json(str(tmp_path / "sound"))
    assert status == 1
    assert [(f["file"], f["message"], f["fix"]) for f in document["findings"]] == [
        (
            "",
            f"{tmp_path / 'sound'} is a model directory (it holds config.pbtxt), not a model repository",
            f"name its parent: {tmp_path}",
        )
    ]


def test_no_repository_is_a_usage_error():
    done = run_check()
    assert done.returncode == 2
    assert "naiad check: name a model repository" in done.stderr


def test_help_describes_every_flag():
    done = subprocess.run([sys.executable, "-m", "naiad.cli", "check", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for flag in (
        "--model-repository",
        "--format",
        "--model-config-name",
        "--backend-config",
        "--disable-auto-complete-config",
    ):
        assert flag in done.stdout


def test_the_example_repository_is_clean(tmp_path):
    repository = tmp_path / "models"
    shutil.copytree(ROOT / "examples" / "models", repository)
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "build_models.py"), "--repository", str(repository)],
        check=True,
        capture_output=True,
    )
    done = run_check(str(repository))
    assert (done.returncode, done.stdout) == (0, "0 errors, 0 warnings; 3 models checked, 0 would fail to load\n")


def test_the_client_example_repositories_are_clean(tmp_path):
    script = ROOT / "scripts" / "client_examples" / "build_repositories.py"
    # The images it writes last need Pillow; the repositories are written before them.
    subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True)
    status, document = check_json(
        "--model-repository", str(tmp_path / "models"), "--model-repository", str(tmp_path / "more_models")
    )
    assert (status, document["findings"], document["summary"]["models"]) == (0, [], 13)


def test_twenty_models_of_mixed_backends_are_checked_in_seconds(tmp_path, record_property):
    onnx_model = add_sub_onnx()
    for index in range(8):
        write_model(
            tmp_path, f"onnx_{index}", {"config.pbtxt": 'platform: "onnxruntime_onnx"\n', "1/model.onnx": onnx_model}
        )
    python_config = (
        'backend: "python"\nmax_batch_size: 4\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    for index in range(8):
        write_model(tmp_path, f"python_{index}", {"config.pbtxt": python_config, "1/model.py": PYTHON_MODEL})
    for index in range(4):
        ensemble = f"""platform: "ensemble"
max_batch_size: 4
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "OTHER" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
ensemble_scheduling {{ step [
  {{ model_name: "python_{index}" input_map {{ key: "INPUT0" value: "IN" }} output_map {{ key: "OUTPUT0" value: "mid" }} }},
  {{ model_name: "onnx_{index}" input_map [ {{ key: "INPUT0" value: "mid" }}, {{ key: "INPUT1" value: "OTHER" }} ]
     output_map {{ key: "OUTPUT0" value: "OUT" }} }}
] }}
"""
        write_model(tmp_path, f"ensemble_{index}", {"config.pbtxt": ensemble, "1/": ""})
    started = time.perf_counter()
    done = run_check(str(tmp_path))
    elapsed = time.perf_counter() - started
    record_property("naiad_check_20_models_s", round(elapsed, 2))
    print(f"naiad check, 20 models (8 ONNX, 8 Python, 4 ensembles): {elapsed:.2f} s")
    assert (done.returncode, done.stdout) == (0, "0 errors, 0 warnings; 20 models checked, 0 would fail to load\n")
    # The figure goes to docs/check.md; this bound only catches a check gone badly wrong
    # (it holds on a machine shared by many, where the figure itself is about 1 s).
    assert elapsed < 30
