"""config.pbtxt parsing and validation: every Triton field parses, bad configs are refused
with messages naming model and field."""

import re
from pathlib import Path

import pytest

from naiad.config.model_config import (
    ConfigError,
    config_from_dict,
    parse_config_text,
    resolve_backend,
    validate_config,
)

HERE = Path(__file__).parent
BENCH_MODELS = Path(__file__).resolve().parents[3] / "shared" / "bench" / "models"


def load(text: str, name: str = "m", model_dir: Path | None = None):
    proto = parse_config_text(text, name)
    return validate_config(proto, name, model_dir)


def test_every_field_parses(tmp_path):
    (tmp_path / "labels.txt").write_text("a\nb\n")
    config = load((HERE / "every_field.pbtxt").read_text(), "every_field", tmp_path)
    p = config.proto
    assert config.max_batch_size == 8
    assert [s.name for s in config.inputs] == ["INPUT0", "INPUT1"]
    assert config.inputs[0].reshape == (48,) and config.inputs[0].optional
    assert config.inputs[1].datatype == "BYTES" and config.inputs[1].dims == (-1,)
    assert config.outputs[0].datatype == "FP16" and config.outputs[0].labels == ("a", "b")
    assert list(p.version_policy.specific.versions) == [1, 3]
    assert p.dynamic_batching.default_queue_policy.max_queue_size == 16
    assert p.dynamic_batching.priority_queue_policy[2].max_queue_size == 4
    assert p.optimization.cuda.graph_spec[0].input["INPUT0"].dim == [3, 4, 4]
    assert p.optimization.execution_accelerators.gpu_execution_accelerator[0].parameters["precision_mode"] == "FP16"
    assert p.instance_group[1].gpus == [0, 1]
    assert p.cc_model_filenames["8.0"] == "model_a100.plan"
    assert config.parameter("intra_op_thread_count") == "2"
    assert p.model_warmup[0].inputs["INPUT0"].zero_data
    assert p.model_repository_agents.agents[0].parameters["MD5:model.onnx"] == "abc"
    assert p.response_cache.enable
    assert list(p.model_metrics.metric_control[0].histogram_options.buckets) == [100, 500]
    assert p.batch_input[0].target_name == ["BATCH_COUNT"]
    as_json = config.to_json_dict()
    assert as_json["name"] == "every_field" and as_json["input"][0]["dims"] == [3, 4, 4]


def test_sequence_and_ensemble_fields_parse():
    sequence = load("""
        backend: "python" max_batch_size: 4
        input [{ name: "IN" data_type: TYPE_INT32 dims: [1] }]
        output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }]
        sequence_batching {
          max_sequence_idle_microseconds: 5000000
          oldest { max_candidate_sequences: 4 preferred_batch_size: [2] max_queue_delay_microseconds: 10 preserve_ordering: true }
          control_input [
            { name: "START" control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }] },
            { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] }
          ]
          state [{ input_name: "S_IN" output_name: "S_OUT" data_type: TYPE_FP32 dims: [1]
                   initial_state { data_type: TYPE_FP32 dims: [1] zero_data: true name: "init" } }]
        }""")
    assert sequence.scheduling == "sequence_batching"
    assert sequence.proto.sequence_batching.oldest.max_candidate_sequences == 4
    ensemble = load("""
        platform: "ensemble" max_batch_size: 1
        input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
        output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]
        ensemble_scheduling { step [{ model_name: "a" model_version: -1
          input_map { key: "X" value: "IN" } output_map { key: "Y" value: "OUT" } }] }""")
    assert ensemble.scheduling == "ensemble_scheduling"
    assert ensemble.proto.ensemble_scheduling.step[0].input_map["X"] == "IN"


@pytest.mark.parametrize("model", ["add_sub", "identity"])
def test_shared_bench_configs_parse(model):
    path = BENCH_MODELS / model / "config.pbtxt"
    if not path.exists():
        pytest.skip("shared/bench is not beside this checkout")
    config = load(path.read_text(), model)
    assert config.backend == "python" and config.name == model


BAD_CONFIGS = [
    ('input [{ name: "X" data_type: TYPE_FLOAT32 dims: [1] }]', "does not parse"),
    ('input [{ name: "X" dims: [1] }]', "model input 'X' must specify 'data_type' for m"),
    ('input [{ name: "X" data_type: TYPE_FP32 }]', "model input 'X' must specify 'dims' for m"),
    (
        'input [{ name: "X" data_type: TYPE_FP32 dims: [0] }]',
        "model input 'X' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m",
    ),
    (
        'input [{ name: "X" data_type: TYPE_FP32 dims: [1] }, { name: "X" data_type: TYPE_FP32 dims: [1] }]',
        "input 'X' (input[1].name): duplicate input name 'X'",
    ),
    (
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [1] }, { name: "Y" data_type: TYPE_FP32 dims: [2] }]',
        "duplicate output name 'Y'",
    ),
    ("max_batch_size: -2", "'max_batch_size' must be non-negative value for m"),
    (
        'input [{ name: "X" data_type: TYPE_FP32 dims: [2, 3] reshape: { shape: [5] } }]',
        "model input 'X' has different size for dims and reshape for m",
    ),
    ("version_policy: { latest: { num_versions: 0 } }", "version_policy.latest.num_versions: must be at least 1"),
    ("version_policy: { specific: { } }", "version_policy.specific.versions: must list at least one version"),
    ("version_policy: { specific: { versions: [0] } }", "version_policy.specific.versions: versions must be positive"),
    ('name: "other"', "unexpected directory name 'm' for model 'other', directory name must equal model name"),
    (
        "max_batch_size: 4 dynamic_batching { preferred_batch_size: [8] }",
        "dynamic batching preferred size must be <= max batch size for m",
    ),
    ("instance_group [{ count: -1 }]", "instance_group[0].count: must not be negative"),
    (
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [1] label_filename: "missing.txt" }]',
        "output 'Y' (output[0].label_filename): cannot read missing.txt",
    ),
    ('platform: "ensemble"', "Ensemble model 'm' must have platform type 'ensemble' and empty backend type"),
    # Found by tests/security/test_fuzz.py. An enum number no value has: both parsers keep it,
    # and the first Name() of it failed the load with a ValueError (a 500 through the load API).
    ('input [{ name: "X" data_type: 99 dims: [1] }]', "input[0].data_type: 99 is not a value of DataType"),
    ("instance_group [{ kind: 7 }]", "instance_group[0].kind: 7 is not a value of Kind (known: KIND_AUTO,"),
    (
        'model_warmup [{ name: "w" batch_size: 1 inputs { key: "X" value { data_type: -3 dims: [1] } } }]',
        "model_warmup[0].inputs[X].data_type: -3 is not a value of DataType",
    ),
    # Counts that size what a load builds: past the bounds, memory ran out before the load failed.
    ("instance_group [{ count: 2147483647 }]", "instance_group: 2147483647 instances in all; a model version may"),
    (
        "instance_group [{ count: 5000 }, { count: 3000 kind: KIND_GPU gpus: [0, 1] }]",
        "instance_group: 11000 instances in all",
    ),
    (
        "max_batch_size: 4 dynamic_batching { priority_levels: 18446744073709551615 default_priority_level: 1 }",
        "dynamic_batching.priority_levels: 18446744073709551615 levels; at most 10000",
    ),
    (
        "max_batch_size: 2147483647 sequence_batching { }",
        "max_batch_size: 2147483647 sequence slots for each of 1 instance(s)",
    ),
    (
        "sequence_batching { oldest { max_candidate_sequences: 1000 } } instance_group [{ count: 1001 }]",
        "sequence_batching.oldest.max_candidate_sequences: 1000 sequence slots for each of 1001 instance(s)",
    ),
]


@pytest.mark.parametrize("text,message", BAD_CONFIGS, ids=[m for _, m in BAD_CONFIGS])
def test_bad_configs_name_model_and_field(tmp_path, text, message):
    with pytest.raises(ConfigError) as info:
        load('backend: "python" ' + text, "m", tmp_path)
    assert info.value.message.startswith("model 'm': ")
    assert message in info.value.message


def test_backend_resolution(tmp_path):
    version = tmp_path / "1"
    version.mkdir()
    proto = parse_config_text('platform: "pytorch_libtorch"', "m")
    resolve_backend(proto, "m", [version])
    assert proto.backend == "pytorch"
    proto = parse_config_text('backend: "onnxruntime"', "m")
    resolve_backend(proto, "m", [version])
    assert proto.platform == "onnxruntime_onnx"
    (version / "model.savedmodel").mkdir()
    proto = parse_config_text("", "m")
    resolve_backend(proto, "m", [version])
    assert (proto.backend, proto.platform) == ("tensorflow", "tensorflow_savedmodel")
    proto = parse_config_text('default_model_filename: "model.py"', "m")
    (version / "model.py").write_text("")
    resolve_backend(proto, "m", [version])
    assert proto.backend == "python"
    with pytest.raises(ConfigError, match="platform: unknown platform 'tensorflow_hub'"):
        resolve_backend(parse_config_text('platform: "tensorflow_hub"', "m"), "m", [version])
    with pytest.raises(ConfigError, match="Invalid model name: Could not determine backend for model 'm'"):
        resolve_backend(parse_config_text("", "m"), "m", [tmp_path / "missing"])
    proto = parse_config_text("", "m.identity")
    resolve_backend(proto, "m.identity", [tmp_path / "missing"])
    assert (proto.backend, proto.default_model_filename) == ("identity", "model.identity")


def test_typed_parameters():
    config = load("""backend: "python"
        parameters { key: "on" value { string_value: "Yes" } }
        parameters { key: "threads" value { string_value: "4" } }
        parameters { key: "empty" value { string_value: "" } }
        parameters { key: "bad" value { string_value: "maybe" } }""")
    assert config.bool_parameter("on", False) is True
    assert config.bool_parameter("empty", True) is True and config.bool_parameter("absent", False) is False
    assert config.int_parameter("threads", None, minimum=1) == 4
    assert config.int_parameter("absent", 7) == 7
    message = "model 'm': parameters.bad: expected true or false (1/0, yes/no, on/off), got 'maybe'"
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.bool_parameter("bad", False)
    with pytest.raises(ConfigError, match="parameters.bad: expected an integer, got 'maybe'"):
        config.int_parameter("bad", 0)
    with pytest.raises(ConfigError, match="parameters.threads: must be at least 8, got 4"):
        config.int_parameter("threads", 0, minimum=8)


def test_what_the_request_path_derives_is_built_once_and_again_after_a_refresh():
    from naiad.config.request_plan import RequestPlan

    config = load(
        'max_batch_size: 4 input [{name: "X" data_type: TYPE_FP32 dims: [2]}] '
        'output [{name: "Y" data_type: TYPE_FP32 dims: [2]}]'
    )
    plan = config.derived(RequestPlan.of)
    assert config.derived(RequestPlan.of) is plan
    assert (plan.max_batch_size, plan.decoupled, plan.response_cache, plan.required_inputs) == (4, False, False, ("X",))
    # A backend that fills the proto in calls refresh(); what was derived before is rebuilt.
    config.proto.max_batch_size = 0
    config.proto.response_cache.enable = True
    config.refresh()
    rebuilt = config.derived(RequestPlan.of)
    assert rebuilt is not plan and (rebuilt.batching, rebuilt.response_cache) == (False, True)


def test_config_json_that_protobuf_cannot_convert_names_the_model(tmp_path):
    """Found by tests/security/test_fuzz.py: ParseDict let an OverflowError (and, for JSON
    nested thousands deep, a RecursionError) escape; a load API caller got a 500."""
    with pytest.raises(ConfigError) as info:
        config_from_dict({"output": [{"name": "Y", "data_type": float("-inf")}]}, "m")
    assert info.value.message == "model 'm': config JSON does not parse: cannot convert float infinity to integer"
    deep: dict = {}
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(ConfigError) as info:
        config_from_dict({"parameters": {"p": deep}}, "m")
    assert info.value.message.startswith("model 'm': config JSON does not parse: ")
