"""`naiad check` through its real command line on a repository holding one broken model per
row: each row's finding carries the file, the line, the message and the fix a user sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("onnx")
pytest.importorskip("naiad_backend_onnx")
pytest.importorskip("naiad_backend_python")

from checked_repositories import PYTHON_MODEL, add_sub_onnx, check_json, write_model  # noqa: E402

ONNX = add_sub_onnx()

# The step models the ensemble rows use: a python model, and an ONNX one completed by
# auto-complete (FP32 [-1, 4] in and out).
STEP_MODELS: dict[str, dict[str, str | bytes]] = {
    "py_step": {
        "config.pbtxt": 'backend: "python"\nmax_batch_size: 4\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        "1/model.py": PYTHON_MODEL,
    },
    "onnx_step": {"config.pbtxt": 'platform: "onnxruntime_onnx"\n', "1/model.onnx": ONNX},
    "narrow_step": {
        "config.pbtxt": 'backend: "python"\nmax_batch_size: 4\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]\n',
        "1/model.py": PYTHON_MODEL,
    },
}


def _cycle(name: str, other: str) -> dict[str, str | bytes]:
    return {
        "config.pbtxt": f"""platform: "ensemble"
max_batch_size: 4
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
ensemble_scheduling {{
  step [
    {{
      model_name: "{other}"
      model_version: -1
      input_map {{ key: "IN" value: "IN" }}
      output_map {{ key: "OUT" value: "OUT" }}
    }}
  ]
}}
""",
        "1/": "",
    }


@dataclass(frozen=True)
class Row:
    model: str
    files: dict[str, str | bytes]
    severity: str
    file: str  # relative to the repository
    line: int | None
    message: str  # the whole message, or a part of it where it names tmp paths or long lists
    fix: str
    whole_message: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


ROWS = [
    Row(
        "unknown_field",
        {
            "config.pbtxt": 'backend: "python"\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
            "max_batch_szie: 4\n",
            "1/model.py": PYTHON_MODEL,
        },
        "error",
        "unknown_field/config.pbtxt",
        3,
        "config.pbtxt line 3: unknown field max_batch_szie; did you mean max_batch_size?",
        "rename max_batch_szie to max_batch_size",
    ),
    Row(
        "bad_enum",
        {
            "config.pbtxt": 'backend: "python"\nmax_batch_size: 4\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP23 dims: [ 4 ] } ]\n',
            "1/model.py": PYTHON_MODEL,
        },
        "error",
        "bad_enum/config.pbtxt",
        3,
        'Enum type "inference.DataType" has no value named TYPE_FP23.',
        "did you mean TYPE_FP32? (values: TYPE_INVALID, TYPE_BOOL, TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, "
        "TYPE_UINT64, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64, "
        "TYPE_STRING, TYPE_BF16)",
        whole_message=False,
    ),
    Row(
        "syntax_error",
        {
            "config.pbtxt": 'backend: "python"\nmax_batch_size: 4\ninstance_group [ { count: 2 kind: KIND_CPU ]\n',
            "1/model.py": PYTHON_MODEL,
        },
        "error",
        "syntax_error/config.pbtxt",
        3,
        "config.pbtxt does not parse: 3:44 : ",
        "correct the protobuf text at this line and column (fields are `name: value` or `name { ... }`)",
        whole_message=False,
    ),
    Row(
        "dims_mismatch",
        {
            "config.pbtxt": 'platform: "onnxruntime_onnx"\nmax_batch_size: 4\ninput [\n'
            '  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8 ] },\n'
            '  { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }\n]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            "1/model.onnx": ONNX,
        },
        "error",
        "dims_mismatch/config.pbtxt",
        4,
        "model 'dims_mismatch', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,4]) but the model "
        "configuration specifies 2 dimensions (an initial batch dimension because max_batch_size > 0 followed by "
        "the explicit tensor shape, making complete shape [-1,8])",
        "make the config agree with the model file (or leave its inputs and outputs out, and auto-complete fills "
        "them in from the model)",
    ),
    Row(
        "missing_model_file",
        {"config.pbtxt": 'platform: "onnxruntime_onnx"\nmax_batch_size: 4\n', "1/": ""},
        "error",
        "missing_model_file/1/model.onnx",
        None,
        "version 1 has no model file 'model.onnx'",
        "put the model file at missing_model_file/1/model.onnx, or set default_model_filename to the name it has",
    ),
    Row(
        "corrupt_model_file",
        {"config.pbtxt": 'platform: "onnxruntime_onnx"\n', "1/model.onnx": b"not an onnx model"},
        "error",
        "corrupt_model_file/1/model.onnx",
        None,
        "onnxruntime cannot load model.onnx: ",
        "replace the model file with one its backend can load (or name the right backend)",
        whole_message=False,
    ),
    Row(
        "outside_version",
        {"config.pbtxt": 'platform: "onnxruntime_onnx"\n', "model.onnx": ONNX},
        "error",
        "outside_version/model.onnx",
        None,
        "model.onnx lies beside config.pbtxt, but model files belong in numbered version directories: move it "
        "into 1/ (1/model.onnx)",
        "move it into 1/",
    ),
    Row(
        "explicit_zero",
        {"config.pbtxt": 'platform: "onnxruntime_onnx"\n\nmax_batch_size: 0\n', "1/model.onnx": ONNX},
        "warning",
        "explicit_zero/config.pbtxt",
        3,
        "max_batch_size is written as 0, so auto-complete keeps it and the model serves without batching; without "
        "that line auto-complete would set max_batch_size to 4, since the model supports batching",
        "remove `max_batch_size: 0` to batch up to 4, or keep it to serve without batching",
    ),
    Row(
        "cycle_a",
        _cycle("cycle_a", "cycle_b"),
        "error",
        "cycle_a/config.pbtxt",
        8,
        "ensemble 'cycle_a': circular dependency between ensembles: cycle_a -> ... -> cycle_b -> cycle_a (its steps "
        "lead back to itself through ensembles: cycle_a -> cycle_b -> cycle_a; an ensemble cannot contain itself)",
        "remove step 0 (model 'cycle_b') or make it name a model that does not lead back to 'cycle_a'",
        extra={"cycle_b": _cycle("cycle_b", "cycle_a")},
    ),
    Row(
        "shape_mismatch",
        {
            "config.pbtxt": """platform: "ensemble"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    { model_name: "narrow_step" input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "mid" } },
    {
      model_name: "onnx_step"
      input_map [ { key: "INPUT0" value: "mid" }, { key: "INPUT1" value: "IN" } ]
      output_map { key: "OUTPUT0" value: "OUT" }
    }
  ]
}
""",
            "1/": "",
        },
        "error",
        "shape_mismatch/config.pbtxt",
        8,
        "ensemble 'shape_mismatch', step 1 (model 'onnx_step'), tensor 'mid': in ensemble shape_mismatch, ensemble "
        "tensor mid: inconsistent shape: [-1,2] is inferred from model narrow_step while [-1,4] is inferred from "
        "model onnx_step (step 0 (model 'narrow_step') output 'OUTPUT0' and step 1 (model 'onnx_step') input "
        "'INPUT0')",
        "make the dims of the tensor agree where it is written and where it is read (or reshape one end)",
    ),
    Row(
        "failing_step",
        {
            "config.pbtxt": """platform: "ensemble"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [ {
    model_name: "negative_batch"
    input_map { key: "INPUT0" value: "IN" }
    output_map { key: "OUTPUT0" value: "OUT" }
  } ]
}
""",
            "1/": "",
        },
        "error",
        "failing_step/config.pbtxt",
        7,
        "step model 'negative_batch' would fail to load, and the ensemble with it",
        "correct 'negative_batch' (its findings are listed under it)",
    ),
    Row(
        "unknown_platform",
        {"config.pbtxt": 'max_batch_size: 4\nplatform: "onnxruntime_onx"\n', "1/model.onnx": ONNX},
        "error",
        "unknown_platform/config.pbtxt",
        2,
        "platform: unknown platform 'onnxruntime_onx' (known: caffe2_netdef, ensemble, onnxruntime_onnx, "
        "pytorch_libtorch, tensorflow_graphdef, tensorflow_savedmodel, tensorrt_plan)",
        'did you mean platform: "onnxruntime_onnx"?',
    ),
    Row(
        "unknown_backend",
        {"config.pbtxt": 'max_batch_size: 4\n\nbackend: "pyhton"\n', "1/model.py": PYTHON_MODEL},
        "error",
        "unknown_backend/config.pbtxt",
        3,
        "backend 'pyhton' is not installed (installed backends: ",
        'did you mean backend: "python"?',
        whole_message=False,
    ),
    Row(
        "duplicate_tensor",
        {
            "config.pbtxt": 'backend: "python"\nmax_batch_size: 4\ninput [\n'
            '  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },\n'
            '  { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }\n]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
            "1/model.py": PYTHON_MODEL,
        },
        "error",
        "duplicate_tensor/config.pbtxt",
        5,
        "input 'INPUT0' (input[1].name): duplicate input name 'INPUT0'",
        "give each input, and each output, a name of its own",
    ),
    Row(
        "version_not_number",
        {"config.pbtxt": 'platform: "onnxruntime_onnx"\n', "1/model.onnx": ONNX, "v2/model.onnx": ONNX},
        "warning",
        "version_not_number/v2/",
        None,
        "directory 'v2' is not a version directory: versions are directories named by a positive number without "
        "leading zeros (1, 2, ...), so a load ignores it",
        "rename it to 2/",
    ),
    Row(
        "no_effect",
        {
            "config.pbtxt": 'backend: "python"\ninstance_group [\n  { count: 1 kind: KIND_CPU passive: true }\n]\n',
            "1/model.py": PYTHON_MODEL,
        },
        "warning",
        "no_effect/config.pbtxt",
        3,
        "config field 'instance_group.passive' has no effect in naiad: naiad schedules requests on every instance",
        "remove instance_group.passive",
    ),
    Row(
        "name_mismatch",
        {"config.pbtxt": 'backend: "python"\nname: "other_name"\n', "1/model.py": PYTHON_MODEL},
        "error",
        "name_mismatch/config.pbtxt",
        2,
        "unexpected directory name 'name_mismatch' for model 'other_name', directory name must equal model name",
        'set name: "name_mismatch" (the directory\'s name), or leave name out',
    ),
    Row(
        "negative_batch",
        {"config.pbtxt": 'backend: "python"\n\nmax_batch_size: -2\n', "1/model.py": PYTHON_MODEL},
        "error",
        "negative_batch/config.pbtxt",
        3,
        "'max_batch_size' must be non-negative value for negative_batch",
        "set max_batch_size to 0 (no batching) or to the largest batch the model takes",
    ),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    repository = tmp_path_factory.mktemp("check") / "models"
    for name, files in STEP_MODELS.items():
        write_model(repository, name, files)
    for row in ROWS:
        write_model(repository, row.model, row.files)
        for name, files in row.extra.items():
            write_model(repository, name, files)
    status, document = check_json(str(repository))
    return status, document, repository


@pytest.mark.parametrize("row", ROWS, ids=[row.model for row in ROWS])
def test_each_broken_config_is_reported_with_file_line_message_and_fix(report, row: Row):
    _, document, repository = report
    findings = [f for f in document["findings"] if f["model"] == row.model and f["severity"] == row.severity]
    matching = [
        f for f in findings if (f["message"] == row.message if row.whole_message else row.message in f["message"])
    ]
    assert len(matching) == 1, findings
    finding = matching[0]
    assert (finding["file"], finding["line"], finding["fix"]) == (row.file, row.line, row.fix)
    assert finding["repository"] == str(repository)


def test_the_sound_models_have_no_findings_and_the_status_is_one(report):
    status, document, _ = report
    assert status == 1
    assert {f["model"] for f in document["findings"]} == {row.model for row in ROWS} | {"cycle_b"}
    summary = document["summary"]
    assert summary["models"] == len(ROWS) + len(STEP_MODELS) + 1
    assert summary["errors"] == sum(f["severity"] == "error" for f in document["findings"])
    assert summary["failing_models"] == sorted({row.model for row in ROWS if row.severity == "error"} | {"cycle_b"})
