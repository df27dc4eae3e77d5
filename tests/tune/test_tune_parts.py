"""The parts of naiad.tune that need no server: the checkpoint file, a candidate applied to a
configuration, the space a model gets."""

from __future__ import annotations

import json

import pytest

from naiad.config import parse_config_text
from naiad.tune.candidate_config import apply_candidate, config_pbtxt
from naiad.tune.checkpoint import Checkpoint, CheckpointError
from naiad.tune.model_space import model_space, parse_values
from naiad.tune.results import CandidateResult, Step
from naiad.tune.space import Candidate

ONNX_CONFIG = """name: "cnn"
platform: "onnxruntime_onnx"
max_batch_size: 64
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 96, 96 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 10 ] } ]
dynamic_batching { preferred_batch_size: [ 64 ] }
"""
ORDER = ("instances", "max_batch_size")


def result(instances: int, rate: float) -> CandidateResult:
    candidate = Candidate((("instances", instances), ("max_batch_size", 8)))
    return CandidateResult(candidate, True, steps=(Step(2, rate, 1.0, 2.0, 1.2),), memory_mb=90.5, seconds=1.5)


def test_a_checkpoint_gives_back_what_was_appended_and_skips_a_line_cut_short(tmp_path):
    path = tmp_path / "search.jsonl"
    checkpoint = Checkpoint(path, "cnn")
    checkpoint.append(result(1, 100.0))
    checkpoint.close()
    with path.open("a") as file:
        file.write('{"candidate": {"instances": 2, "max_batch_')  # the run stopped here
    again = Checkpoint(path, "cnn")
    assert again.read(ORDER) == [result(1, 100.0)]
    again.append(result(3, 300.0))
    again.close()
    assert Checkpoint(path, "cnn").read(ORDER) == [result(1, 100.0), result(3, 300.0)]
    assert json.loads(path.read_text().splitlines()[0]) == {"format": "naiad-tune-checkpoint/1", "model": "cnn"}
    # Another space's points (other dimensions) are not this search's.
    assert Checkpoint(path, "cnn").read(("instances",)) == []


def test_a_file_that_is_not_a_checkpoint_is_refused_naming_it(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(CheckpointError, match="the first line is not a naiad tune checkpoint header"):
        Checkpoint(path, "cnn").read(ORDER)


def test_a_candidate_changes_only_its_fields_and_drops_preferred_sizes_it_no_longer_allows():
    base = parse_config_text(ONNX_CONFIG, "cnn")
    candidate = Candidate(
        (("instances", 2), ("max_batch_size", 16), ("max_queue_delay_us", 500), ("intra_op_threads", 1))
    )
    assert config_pbtxt(apply_candidate(base, candidate)) == (
        'name: "cnn"\n'
        'platform: "onnxruntime_onnx"\n'
        "max_batch_size: 16\n"
        'input {\n  name: "INPUT__0"\n  data_type: TYPE_FP32\n  dims: 3\n  dims: 96\n  dims: 96\n}\n'
        'output {\n  name: "OUTPUT__0"\n  data_type: TYPE_FP32\n  dims: 10\n}\n'
        "instance_group {\n  count: 2\n  kind: KIND_CPU\n}\n"
        "dynamic_batching {\n  max_queue_delay_microseconds: 500\n}\n"
        'parameters {\n  key: "intra_op_thread_count"\n  value {\n    string_value: "1"\n  }\n}\n'
    )
    # The base itself is left as it was.
    assert base.max_batch_size == 64 and list(base.dynamic_batching.preferred_batch_size) == [64]


def test_pytorch_threads_use_its_parameter_names():
    base = parse_config_text(ONNX_CONFIG.replace("onnxruntime_onnx", "pytorch_libtorch"), "cnn")
    config = apply_candidate(base, Candidate((("intra_op_threads", 2), ("inter_op_threads", 1))))
    assert {k: v.string_value for k, v in config.parameters.items()} == {
        "INTRA_OP_THREAD_COUNT": "2",
        "INTER_OP_THREAD_COUNT": "1",
    }


def test_the_space_of_a_model_follows_its_backend_and_batching():
    onnx = parse_config_text(ONNX_CONFIG, "cnn")
    assert model_space(onnx, {}, launched=True, cpus=2).describe() == [
        "instances: 1, 2, 4",
        "max_batch_size: 1, 4, 16, 64",
        "max_queue_delay_us: 0, 100, 1000",
        "intra_op_threads: 1, 2",
    ]
    python = parse_config_text(ONNX_CONFIG.replace('platform: "onnxruntime_onnx"', 'backend: "python"'), "cnn")
    assert model_space(python, {"instances": (1, 2)}, launched=False, cpus=2).describe() == [
        "instances: 1, 2",
        "max_batch_size: 1, 4, 16, 64",
        "max_queue_delay_us: 0, 100, 1000",
    ]
    with pytest.raises(ValueError, match="intra_op_threads: the 'python' backend reads no thread parameters"):
        model_space(python, {"intra_op_threads": (1, 2)}, launched=True)
    with pytest.raises(ValueError, match="workers: tune can only change the workers of a server it starts itself"):
        model_space(onnx, {"workers": (1, 2)}, launched=False)
    unbatched = parse_config_text(ONNX_CONFIG.replace("max_batch_size: 64", "max_batch_size: 0"), "cnn")
    with pytest.raises(ValueError, match="max_queue_delay_us: 'cnn' does not use dynamic batching"):
        model_space(unbatched, {"max_queue_delay_us": (0, 100)}, launched=True)


def test_value_lists_are_read_or_refused_with_the_text():
    assert parse_values("1, 2,4") == (1, 2, 4)
    with pytest.raises(ValueError, match="'1,two' is not a comma-separated list of whole numbers"):
        parse_values("1,two")
    with pytest.raises(ValueError, match="'-1': values must be 0 or more"):
        parse_values("-1")
