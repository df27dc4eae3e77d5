"""Everything of the TensorRT backend that needs no GPU: engine file choice by compute
capability, datatype mapping, auto-complete and config checks against an engine
description, optimization profile choice."""

from __future__ import annotations

import numpy as np
import pytest
from naiad_backend_tensorrt.auto_complete import auto_complete_from_engine
from naiad_backend_tensorrt.compute_capability import select_plan_filename
from naiad_backend_tensorrt.config_check import check_config_against_engine
from naiad_backend_tensorrt.dtypes import datatype_of_trt, numpy_dtype_of
from naiad_backend_tensorrt.engine_description import EngineDescription, EngineTensor, ProfileShape
from naiad_backend_tensorrt.profiles import allowed_profiles, choose_profile

from naiad import ConfigError, ModelConfig, NaiadError
from naiad.config import parse_config_text


def engine(batch_max=(8, 32)) -> EngineDescription:
    """What describe_engine returns for an engine with a dynamic batch dimension and two
    optimization profiles: INPUT0 [-1, 4] FP32, MASK [-1, 4] BOOL -> OUTPUT0 [-1, 3] FP16."""
    profiles = tuple(ProfileShape((lo, 4), (hi, 4), (hi, 4)) for lo, hi in zip((1, batch_max[0] + 1), batch_max))
    return EngineDescription(
        (
            EngineTensor("INPUT0", True, "FLOAT", (-1, 4), profiles=profiles),
            EngineTensor("MASK", True, "BOOL", (-1, 4), profiles=profiles),
            EngineTensor("OUTPUT0", False, "HALF", (-1, 3)),
        ),
        num_profiles=2,
    )


def config(text: str, name: str = "plan") -> ModelConfig:
    proto = parse_config_text(text, name)
    proto.name = name
    return ModelConfig(proto)


# -- compute capability ------------------------------------------------------------------


def test_engine_file_chosen_by_compute_capability():
    files = {"7.5": "model_t4.plan", " 8.0 ": "model_a100.plan", "9.0": "model_h100.plan"}
    assert select_plan_filename(files, (7, 5), "model.plan") == "model_t4.plan"
    assert select_plan_filename(files, (8, 0), "model.plan") == "model_a100.plan"
    assert select_plan_filename(files, (8, 6), "model.plan") == "model.plan"
    assert select_plan_filename({}, (9, 0), "custom.plan") == "custom.plan"


# -- datatypes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "trt_name,datatype,dtype",
    [
        ("FLOAT", "FP32", np.float32),
        ("HALF", "FP16", np.float16),
        ("BF16", "BF16", np.uint16),
        ("INT8", "INT8", np.int8),
        ("INT32", "INT32", np.int32),
        ("INT64", "INT64", np.int64),
        ("BOOL", "BOOL", np.bool_),
        ("UINT8", "UINT8", np.uint8),
        ("DataType.FLOAT", "FP32", np.float32),
    ],
)
def test_datatype_mapping(trt_name, datatype, dtype):
    assert datatype_of_trt(trt_name) == datatype
    assert numpy_dtype_of(datatype) == np.dtype(dtype)


@pytest.mark.parametrize("trt_name", ["FP8", "INT4", "FP4"])
def test_types_clients_cannot_carry_have_no_datatype(trt_name):
    assert datatype_of_trt(trt_name) is None


# -- auto-complete -----------------------------------------------------------------------


def test_auto_complete_from_engine_without_config():
    cfg = config("")
    auto_complete_from_engine(cfg, engine(), "plan")
    assert cfg.platform == "tensorrt_plan"
    assert cfg.max_batch_size == 32  # the largest first dimension some profile accepts
    assert [(s.name, s.datatype, s.dims) for s in cfg.inputs] == [("INPUT0", "FP32", (4,)), ("MASK", "BOOL", (4,))]
    assert [(s.name, s.datatype, s.dims) for s in cfg.outputs] == [("OUTPUT0", "FP16", (3,))]
    assert cfg.scheduling == "dynamic_batching"
    check_config_against_engine(cfg, engine(), "plan")


def test_auto_complete_keeps_an_unbatched_full_rank_config():
    cfg = config('input [{name: "INPUT0" data_type: TYPE_FP32 dims: [-1, 4]}]')
    auto_complete_from_engine(cfg, engine(), "plan")
    assert cfg.max_batch_size == 0
    assert [s.name for s in cfg.inputs] == ["INPUT0"]  # listed inputs are not extended
    assert cfg.output_by_name["OUTPUT0"].dims == (-1, 3)


def test_auto_complete_fills_listed_tensors_only():
    cfg = config('max_batch_size: 4 output [{name: "OUTPUT0"}]')
    auto_complete_from_engine(cfg, engine(), "plan")
    assert cfg.max_batch_size == 4
    assert [(s.name, s.datatype, s.dims) for s in cfg.outputs] == [("OUTPUT0", "FP16", (3,))]


def test_engine_with_fixed_first_dimension_does_not_batch():
    fixed = EngineDescription((EngineTensor("x", True, "FLOAT", (1, 4)), EngineTensor("y", False, "FLOAT", (1,))))
    assert fixed.batch_capacity() == 0
    cfg = config("")
    auto_complete_from_engine(cfg, fixed, "plan")
    assert cfg.max_batch_size == 0
    assert cfg.input_by_name["x"].dims == (1, 4) and cfg.output_by_name["y"].dims == (1,)


def test_auto_complete_marks_shape_tensors_and_keeps_their_first_dimension():
    shaped = EngineDescription(
        (
            EngineTensor("x", True, "FLOAT", (-1, 4), profiles=(ProfileShape((1, 4), (8, 4), (8, 4)),)),
            EngineTensor("shape", True, "INT32", (2,), is_shape_tensor=True, on_host=True),
            EngineTensor("y", False, "FLOAT", (-1, 4)),
        )
    )
    cfg = config("max_batch_size: 8")
    auto_complete_from_engine(cfg, shaped, "plan")
    entries = {entry.name: entry for entry in cfg.proto.input}
    assert entries["shape"].is_shape_tensor and list(entries["shape"].dims) == [2]
    assert not entries["x"].is_shape_tensor and list(entries["x"].dims) == [4]


def test_auto_complete_names_a_listed_tensor_of_a_type_clients_cannot_carry():
    fp8 = EngineDescription((EngineTensor("x", True, "FP8", (4,)), EngineTensor("y", False, "FLOAT", (4,))))
    with pytest.raises(ConfigError) as info:
        auto_complete_from_engine(config('input [{name: "x"}]'), fp8, "plan")
    assert "input 'x' (input[0].data_type): the engine's type FP8 has no Triton datatype" in info.value.message


# -- config check ------------------------------------------------------------------------

GOOD = """max_batch_size: 8
input [{name: "INPUT0" data_type: TYPE_FP32 dims: [4]}, {name: "MASK" data_type: TYPE_BOOL dims: [4]}]
output [{name: "OUTPUT0" data_type: TYPE_FP16 dims: [3]}]"""


@pytest.mark.parametrize(
    "text,words",
    [
        (GOOD.replace('"INPUT0"', '"IMAGE"'), ["input 'IMAGE'", "no input", "INPUT0, MASK"]),
        (GOOD.replace("TYPE_FP16", "TYPE_FP32"), ["output 'OUTPUT0'", "TYPE_FP32", "HALF"]),
        (GOOD.replace("dims: [3]", "dims: [5]"), ["tensor 'OUTPUT0'", "making complete shape [-1,5]"]),
        (GOOD.replace("dims: [3]", "dims: [1, 3]"), ["tensor 'OUTPUT0'", "[-1,1,3]", "batch dimension"]),
        (GOOD.replace(', {name: "MASK" data_type: TYPE_BOOL dims: [4]}', ""), ["needs input(s) ['MASK']"]),
        (GOOD.replace("max_batch_size: 8", "max_batch_size: 64"), ["max_batch_size", "64", "(32)"]),
    ],
)
def test_config_mismatch_names_the_fault(text, words):
    with pytest.raises(ConfigError) as info:
        check_config_against_engine(config(text), engine(), "plan")
    for word in words:
        assert word in info.value.message
    assert "model 'plan'" in info.value.message


def test_instance_profiles_limit_the_batch_size():
    cfg = config(GOOD.replace("max_batch_size: 8", "max_batch_size: 16"))
    check_config_against_engine(cfg, engine(), "plan")
    with pytest.raises(ConfigError) as info:
        check_config_against_engine(cfg, engine(), "plan", profiles=[0])
    assert "(8)" in info.value.message


# -- optimization profiles ---------------------------------------------------------------


def test_profile_chosen_by_input_shapes():
    description = engine()
    assert choose_profile(description, [0, 1], {"INPUT0": (3, 4), "MASK": (3, 4)}) == 0
    assert choose_profile(description, [0, 1], {"INPUT0": (20, 4), "MASK": (20, 4)}) == 1
    assert choose_profile(description, [1], {"INPUT0": (20, 4), "MASK": (20, 4)}) == 1
    with pytest.raises(NaiadError) as info:
        choose_profile(description, [0], {"INPUT0": (20, 4), "MASK": (20, 4)})
    assert "'INPUT0' [20, 4]" in info.value.message and "profile 0: 'INPUT0' [1, 4]..[8, 4]" in info.value.message


def test_instance_group_profiles():
    cfg = config('instance_group [{name: "fast" kind: KIND_GPU profile: ["1"]}, {kind: KIND_GPU}]')
    assert allowed_profiles(cfg, "fast", 2, "plan") == [1]
    assert allowed_profiles(cfg, "plan_1", 2, "plan") == [0, 1]
    bad = config('instance_group [{name: "g" kind: KIND_GPU profile: ["2"]}]')
    with pytest.raises(ConfigError) as info:
        allowed_profiles(bad, "g", 2, "plan")
    assert "instance_group[0].profile" in info.value.message and "'2'" in info.value.message
